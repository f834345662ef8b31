// SPDX-License-Identifier: MIT

// gopprof is a Go service exposing net/http/pprof (standard library only): the scrape tests'
// and benchmark's real peer. It does known work:
//
//   - CPU: spinA and spinB burn 2:1 of -duty of a core (half; -cpu=false: none);
//   - heap: allocKnown allocates -alloc-rate bytes per second in 4 KiB objects, and keeps the
//     last -keep of them in use; with -alloc-total it stops after exactly that many bytes, and it
//     starts only after the first /debug/pprof/heap answer (the scraper's baseline), so a sum of
//     the deltas after it is the known total;
//   - mutex: lockKnown contends on one mutex (profile fraction 1);
//
// and prints "listening PORT" once it serves, "alloc-done BYTES" when -alloc-total is reached.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

var (
	sink    [][]byte
	started int32
	startCh = make(chan struct{})
)

//go:noinline
func spinA(n int) int {
	x := 0
	for i := 0; i < n; i++ {
		x += i * i
	}
	return x
}

//go:noinline
func spinB(n int) int {
	x := 0
	for i := 0; i < n; i++ {
		x ^= i * 3
	}
	return x
}

// burn keeps duty of a core busy (a whole one starves allocate on a loaded machine).
func burn(duty float64) {
	for {
		t := time.Now()
		spinA(2000000)
		spinB(1000000)
		if duty < 1 {
			time.Sleep(time.Duration(float64(time.Since(t)) * (1 - duty) / duty))
		}
	}
}

//go:noinline
func allocKnown(keep int) {
	b := make([]byte, 4096)
	b[0] = 1
	if len(sink) < keep {
		sink = append(sink, b)
	} else if keep > 0 {
		sink[int(b[0])%keep] = b
	}
}

// allocate follows the wall clock, not the ticks: a loaded machine delays and drops ticks,
// and a fixed amount per tick then fell to half the rate (a CI run's heap deltas averaged
// under 0.6 of a round's worth). Each tick catches up to rate x elapsed. A GC every 200 ms:
// Go's heap profile is as of the last GC, and left to itself (every 0.5-1 s here) one scrape's
// delta came out 1.85 rounds' worth and the one before it 0.6.
func allocate(rate, total int64, keep int) {
	<-startCh
	const chunk = 4096
	var done int64
	t0 := time.Now()
	lastGC := t0
	tick := time.NewTicker(10 * time.Millisecond)
	for range tick.C {
		if time.Since(lastGC) >= 200*time.Millisecond {
			runtime.GC()
			lastGC = time.Now()
		}
		due := int64(time.Since(t0).Seconds() * float64(rate))
		if total > 0 && due > total {
			due = total
		}
		for ; done < due; done += chunk {
			allocKnown(keep)
		}
		if total > 0 && done >= total {
			runtime.GC()
			fmt.Printf("alloc-done %d\n", done)
			return
		}
	}
}

//go:noinline
func lockKnown(mu *sync.Mutex) {
	mu.Lock()
	time.Sleep(time.Millisecond)
	mu.Unlock()
}

func contend() {
	var mu sync.Mutex
	for i := 0; i < 2; i++ {
		go func() {
			for {
				lockKnown(&mu)
			}
		}()
	}
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address")
	rate := flag.Int64("alloc-rate", 8<<20, "bytes allocated per second by allocKnown")
	total := flag.Int64("alloc-total", 0, "stop after this many bytes (0: never)")
	keep := flag.Int("keep", 256, "objects allocKnown keeps in use")
	memrate := flag.Int("memprofilerate", 512*1024, "runtime.MemProfileRate")
	cpu := flag.Bool("cpu", true, "burn CPU in spinA/spinB")
	duty := flag.Float64("duty", 0.5, "share of a core spinA/spinB burn (0 < duty <= 1)")
	flag.Parse()
	runtime.MemProfileRate = *memrate
	runtime.SetMutexProfileFraction(1)
	runtime.SetBlockProfileRate(int(time.Millisecond))
	heap := http.DefaultServeMux
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/heap", func(w http.ResponseWriter, r *http.Request) {
		heap.ServeHTTP(w, r)
		if atomic.CompareAndSwapInt32(&started, 0, 1) {
			close(startCh)
		}
	})
	mux.Handle("/", heap)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *cpu {
		go burn(*duty)
	}
	go allocate(*rate, *total, *keep)
	contend()
	fmt.Printf("listening %d\n", ln.Addr().(*net.TCPAddr).Port)
	http.Serve(ln, mux)
}
