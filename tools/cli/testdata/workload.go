// SPDX-License-Identifier: MIT
//
// workload.go — writes real Go runtime profiles for the edgeprof CLI tests (standard library
// only): two CPU profiles with different mixes of three named burners plus some library work,
// a heap, a goroutine and a mutex profile.
//
//	workload OUTDIR
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"time"
)

var sink uint64
var keep [][]byte

//go:noinline
func burnAlpha(d time.Duration) {
	for t0 := time.Now(); time.Since(t0) < d; {
		for i := 0; i < 20000; i++ {
			sink += uint64(i) * 7
		}
	}
}

//go:noinline
func burnBeta(d time.Duration) {
	for t0 := time.Now(); time.Since(t0) < d; {
		for i := 0; i < 20000; i++ {
			sink ^= uint64(i) << 3
		}
	}
}

//go:noinline
func burnGamma(d time.Duration) {
	for t0 := time.Now(); time.Since(t0) < d; {
		for i := 0; i < 20000; i++ {
			sink = sink*31 + uint64(i)
		}
	}
}

// small helpers the compiler inlines: pprof labels them "(inline)"
func mix(a, b int) int { return a*31 + b }

//go:noinline
func library(d time.Duration) {
	for t0 := time.Now(); time.Since(t0) < d; {
		xs := make([]int, 2000)
		for i := range xs {
			xs[i] = mix(i, len(xs)-i) % 977
		}
		sort.Ints(xs)
		s := strings.Repeat("edge prof ", 50)
		sink += uint64(len(strings.Fields(s)) + len(fmt.Sprintf("%d", xs[10])))
		keep = append(keep, make([]byte, 4096))
		if len(keep) > 64 {
			keep = keep[:0]
		}
	}
}

func cpuProfile(path string, alpha, beta, gamma time.Duration) {
	f, err := os.Create(path)
	if err != nil {
		panic(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		panic(err)
	}
	for r := 0; r < 4; r++ {
		burnAlpha(alpha)
		burnBeta(beta)
		burnGamma(gamma)
		library(60 * time.Millisecond)
	}
	pprof.StopCPUProfile()
	f.Close()
}

func contend() {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				mu.Lock()
				for t0 := time.Now(); time.Since(t0) < 50*time.Microsecond; {
					sink++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func write(name, path string) {
	f, err := os.Create(path)
	if err != nil {
		panic(err)
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		panic(err)
	}
	f.Close()
}

func main() {
	dir := os.Args[1]
	runtime.SetMutexProfileFraction(1)
	runtime.MemProfileRate = 512
	cpuProfile(filepath.Join(dir, "cpu1.pb.gz"), 150*time.Millisecond, 60*time.Millisecond,
		30*time.Millisecond)
	cpuProfile(filepath.Join(dir, "cpu2.pb.gz"), 30*time.Millisecond, 60*time.Millisecond,
		150*time.Millisecond)
	contend()
	done := make(chan bool)
	for i := 0; i < 5; i++ {
		go func() { <-done }()
	}
	write("heap", filepath.Join(dir, "heap.pb.gz"))
	write("goroutine", filepath.Join(dir, "goroutine.pb.gz"))
	write("mutex", filepath.Join(dir, "mutex.pb.gz"))
	close(done)
}
