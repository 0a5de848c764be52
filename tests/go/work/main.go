// Work is a Go program that uses what Go programs use: goroutines, channels,
// sync.Mutex, a timer and the garbage collector. Its output is the same
// however the goroutines interleave, so a test compares it with a native
// run. GOMAXPROCS follows the cores the machine has.
package main

import (
	"fmt"
	"runtime"
	"sync"
	"time"
)

type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) add(k int) {
	c.mu.Lock()
	c.n += k
	c.mu.Unlock()
}

func main() {
	const workers, jobs = 4, 200
	in := make(chan int)
	out := make(chan int, jobs)
	var c counter
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range in {
				garbage := make([]byte, 4096)
				garbage[0] = byte(j)
				c.add(twice(j))
				out <- j
			}
		}()
	}
	for j := 1; j <= jobs; j++ {
		in <- j
	}
	close(in)
	wg.Wait()
	close(out)
	sum := 0
	for j := range out {
		sum += j
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	// The clock read before the timer is made: read after, the timer's
	// 20 ms may have begun first, and natively it can fire under 20 ms
	// after the read.
	start := time.Now()
	timer := time.NewTimer(20 * time.Millisecond)
	<-timer.C
	waited := time.Since(start) >= 20*time.Millisecond
	fmt.Printf("sum %d doubled %d\n", sum, c.n)
	fmt.Printf("gc ran %v, timer waited %v, cgo %v\n", ms.NumGC > 0, waited, cgo)
	fmt.Printf("GOMAXPROCS %d\n", runtime.GOMAXPROCS(0))
}
