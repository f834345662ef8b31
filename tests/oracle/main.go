// SPDX-License-Identifier: MIT
//
// oracle writes reference pprof profiles with Go's own runtime/pprof (standard library only):
// cpu.pb.gz, heap.pb.gz, goroutine.pb.gz, mutex.pb.gz, block.pb.gz into the directory given as
// the first argument. The second argument (optional) varies the workload so that several runs
// give different but mergeable profiles.
package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

var sink []byte

func hashLoop(n int) {
	b := make([]byte, 4096)
	for i := 0; i < n; i++ {
		s := sha256.Sum256(b)
		b[i%len(b)] = s[0]
	}
}

func sortLoop(n int) {
	for i := 0; i < n; i++ {
		a := make([]int, 2000)
		for j := range a {
			a[j] = (j * 7919) % 2003
		}
		sort.Ints(a)
	}
}

func stringLoop(n int) {
	for i := 0; i < n; i++ {
		s := strings.Repeat("edgeprof ", 64)
		sink = []byte(strings.ToUpper(s) + strconv.Itoa(i))
	}
}

func allocate(n int) [][]byte {
	keep := make([][]byte, 0, n)
	for i := 0; i < n; i++ {
		keep = append(keep, make([]byte, 1024+i%4096))
	}
	return keep
}

func contend(workers, rounds int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	counter := 0
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				mu.Lock()
				counter++
				hashLoop(2)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func write(dir, name string, fn func(f *os.File) error) {
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := fn(f); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	f.Close()
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: oracle DIR [VARIANT]")
		os.Exit(2)
	}
	dir := os.Args[1]
	variant := 0
	if len(os.Args) > 2 {
		variant, _ = strconv.Atoi(os.Args[2])
	}
	runtime.SetMutexProfileFraction(1)
	runtime.SetBlockProfileRate(1)
	runtime.MemProfileRate = 4096

	write(dir, "cpu.pb.gz", func(f *os.File) error {
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		deadline := time.Now().Add(time.Duration(300+50*variant) * time.Millisecond)
		for time.Now().Before(deadline) {
			switch variant % 3 {
			case 0:
				hashLoop(200)
				sortLoop(5)
			case 1:
				stringLoop(300)
				hashLoop(100)
			default:
				sortLoop(10)
				stringLoop(100)
			}
		}
		pprof.StopCPUProfile()
		return nil
	})
	keep := allocate(2000 + 500*variant)
	contend(4, 200+50*variant)
	blocked := make(chan struct{})
	for i := 0; i < 3; i++ {
		go func() { <-blocked }()
	}
	runtime.GC()
	for _, name := range []string{"heap", "goroutine", "mutex", "block"} {
		n := name
		write(dir, n+".pb.gz", func(f *os.File) error { return pprof.Lookup(n).WriteTo(f, 0) })
	}
	close(blocked)
	runtime.KeepAlive(keep)
}
