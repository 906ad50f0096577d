package bench

import (
	"fmt"
	"io"
	"time"
)

// progress rewrites a progress line on out about every second until done
// is closed, then writes the final one and a newline.
func progress(out io.Writer, start time.Time, ws []*worker, done <-chan struct{}) {
	sum := func() (checks, errs int64) {
		for _, w := range ws {
			checks += w.checks.Load()
			errs += w.errs.Load()
		}
		return checks, errs
	}
	line := func(now time.Time, rate float64) {
		checks, errs := sum()
		fmt.Fprintf(out, "\r%6.1fs  %10.0f checks/s  %12d checks  %8d errors   ",
			now.Sub(start).Seconds(), rate, checks, errs)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	prevT, prevN := start, int64(0)
	for {
		select {
		case now := <-tick.C:
			n, _ := sum()
			line(now, float64(n-prevN)/now.Sub(prevT).Seconds())
			prevT, prevN = now, n
		case <-done:
			now := time.Now()
			n, _ := sum()
			line(now, float64(n)/max(now.Sub(start).Seconds(), 1e-9))
			fmt.Fprintln(out)
			return
		}
	}
}
