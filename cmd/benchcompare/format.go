package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/internal/bench"
)

func accuracy(a bench.Audit) string {
	if a.Bound <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%s/%s (%.3f), %d over", fmtInt(a.WorstAdmitted), fmtInt(a.Bound), a.WorstRatio, a.OverBound)
}

// fmtInt formats n with thousands separators.
func fmtInt(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func fmtRate(f float64) string { return fmtInt(int64(math.Round(f))) }

// fmtMs formats a latency in milliseconds with 3 significant digits.
func fmtMs(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms < 1:
		return fmt.Sprintf("%.3f ms", ms)
	case ms < 10:
		return fmt.Sprintf("%.2f ms", ms)
	case ms < 100:
		return fmt.Sprintf("%.1f ms", ms)
	}
	return fmt.Sprintf("%.0f ms", ms)
}

func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func fmtSeconds(s float64) string {
	return strconv.FormatFloat(s, 'f', -1, 64) + " s"
}

// fmtPeriod names a limit's period: "second", "hour", or the duration.
func fmtPeriod(d time.Duration) string {
	switch d {
	case time.Second:
		return "second"
	case time.Minute:
		return "minute"
	case time.Hour:
		return "hour"
	case 24 * time.Hour:
		return "day"
	}
	return d.String()
}
