package bucket_test

import (
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// BenchmarkXTimeRateAllow measures golang.org/x/time/rate's AllowN, the
// single-process token bucket that TakeToken is compared with, in the same
// run and with the same advance of time per call.
func BenchmarkXTimeRateAllow(b *testing.B) {
	lim := rate.NewLimiter(rate.Limit(1000), 1000)
	t := time.Unix(1_700_000_000, 0)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		t = t.Add(700 * time.Microsecond)
		lim.AllowN(t, 1)
	}
}
