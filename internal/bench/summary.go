package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Summary is the outcome of a run. It marshals to JSON with snake_case
// names; durations are float milliseconds in fields named *_ms.
type Summary struct {
	// Checks = Allowed + Denied + Errors: the checks answered (an error
	// fails every check of its call).
	Checks, Allowed, Denied, Errors int64
	// Elapsed is the run's wall time, until the last answer.
	Elapsed time.Duration
	// ChecksPerSec is Checks / Elapsed.
	ChecksPerSec float64
	// Offered is the open loop's Rate; 0 for a closed loop.
	Offered float64
	Latency Latency
	Audit   Audit
	// Percentiles is the latency distribution for plots: HDR's percentile
	// distribution points from 0 up to 99.999, increasing.
	Percentiles []Point
	// FirstError is the first error seen, "" if none.
	FirstError string
}

// Latency summarizes the latency of the checks, errors included (every
// check of a call has the call's latency).
type Latency struct{ P50, P90, P99, P999, Max, Mean time.Duration }

// Point is one point of the latency distribution.
type Point struct {
	Percentile float64
	Latency    time.Duration
}

// Audit compares each key's admitted checks with the most a correct limiter
// admits in the run.
type Audit struct {
	// Keys is the number of keys that had at least one check answered.
	Keys int
	// Bound is, per key, the most a correct limiter admits in the run:
	// Burst (or Limit) + floor(Limit × W / Period), where W is the wall
	// time from the first call sent to the last answer (a token bucket
	// that starts full).
	Bound int64
	// WorstKey is the key with the most admitted checks, WorstAdmitted
	// their number and WorstRatio WorstAdmitted / Bound.
	WorstKey      string
	WorstAdmitted int64
	WorstRatio    float64
	// OverBound is the number of keys whose admitted count exceeded Bound.
	OverBound int
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fromMS(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }

type latencyJSON struct {
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p999_ms"`
	Max  float64 `json:"max_ms"`
	Mean float64 `json:"mean_ms"`
}

// MarshalJSON writes the durations as float milliseconds.
func (l Latency) MarshalJSON() ([]byte, error) {
	return json.Marshal(latencyJSON{ms(l.P50), ms(l.P90), ms(l.P99), ms(l.P999), ms(l.Max), ms(l.Mean)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (l *Latency) UnmarshalJSON(b []byte) error {
	var j latencyJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*l = Latency{fromMS(j.P50), fromMS(j.P90), fromMS(j.P99), fromMS(j.P999), fromMS(j.Max), fromMS(j.Mean)}
	return nil
}

type pointJSON struct {
	Percentile float64 `json:"percentile"`
	Latency    float64 `json:"latency_ms"`
}

// MarshalJSON writes the latency as float milliseconds.
func (p Point) MarshalJSON() ([]byte, error) {
	return json.Marshal(pointJSON{p.Percentile, ms(p.Latency)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *Point) UnmarshalJSON(b []byte) error {
	var j pointJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*p = Point{j.Percentile, fromMS(j.Latency)}
	return nil
}

type auditJSON struct {
	Keys          int     `json:"keys"`
	Bound         int64   `json:"bound"`
	WorstKey      string  `json:"worst_key"`
	WorstAdmitted int64   `json:"worst_admitted"`
	WorstRatio    float64 `json:"worst_ratio"`
	OverBound     int     `json:"over_bound"`
}

// MarshalJSON writes snake_case names.
func (a Audit) MarshalJSON() ([]byte, error) { return json.Marshal(auditJSON(a)) }

// UnmarshalJSON reads what MarshalJSON writes.
func (a *Audit) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, (*auditJSON)(a)) }

type summaryJSON struct {
	Checks       int64   `json:"checks"`
	Allowed      int64   `json:"allowed"`
	Denied       int64   `json:"denied"`
	Errors       int64   `json:"errors"`
	Elapsed      float64 `json:"elapsed_ms"`
	ChecksPerSec float64 `json:"checks_per_sec"`
	Offered      float64 `json:"offered"`
	Latency      Latency `json:"latency"`
	Audit        Audit   `json:"audit"`
	Percentiles  []Point `json:"percentiles"`
	FirstError   string  `json:"first_error"`
}

// MarshalJSON writes snake_case names and durations as float milliseconds.
func (s Summary) MarshalJSON() ([]byte, error) {
	ps := s.Percentiles
	if ps == nil {
		ps = []Point{}
	}
	return json.Marshal(summaryJSON{s.Checks, s.Allowed, s.Denied, s.Errors, ms(s.Elapsed),
		s.ChecksPerSec, s.Offered, s.Latency, s.Audit, ps, s.FirstError})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *Summary) UnmarshalJSON(b []byte) error {
	var j summaryJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = Summary{Checks: j.Checks, Allowed: j.Allowed, Denied: j.Denied, Errors: j.Errors,
		Elapsed: fromMS(j.Elapsed), ChecksPerSec: j.ChecksPerSec, Offered: j.Offered,
		Latency: j.Latency, Audit: j.Audit, Percentiles: j.Percentiles, FirstError: j.FirstError}
	return nil
}

// Format writes the human summary: a few aligned lines.
func (s Summary) Format(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "checks:     %d in %s\n", s.Checks, fmtDuration(s.Elapsed))
	fmt.Fprintf(&b, "checks/s:   %.1f", s.ChecksPerSec)
	if s.Offered > 0 {
		fmt.Fprintf(&b, " (offered %.1f)", s.Offered)
	}
	b.WriteByte('\n')
	l := s.Latency
	fmt.Fprintf(&b, "latency:    p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  (mean %s)\n",
		fmtDuration(l.P50), fmtDuration(l.P90), fmtDuration(l.P99), fmtDuration(l.P999), fmtDuration(l.Max), fmtDuration(l.Mean))
	fmt.Fprintf(&b, "answers:    allowed %d  denied %d  errors %d\n", s.Allowed, s.Denied, s.Errors)
	a := s.Audit
	if a.Keys == 0 {
		fmt.Fprintf(&b, "accuracy:   no key answered (bound %d per key)\n", a.Bound)
	} else {
		fmt.Fprintf(&b, "accuracy:   worst key %s admitted %d of bound %d (%.3fx), %d keys over bound (%d keys checked)\n",
			a.WorstKey, a.WorstAdmitted, a.Bound, a.WorstRatio, a.OverBound, a.Keys)
	}
	if s.FirstError != "" {
		fmt.Fprintf(&b, "first error: %s\n", s.FirstError)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// fmtDuration prints d with about three significant digits.
func fmtDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return sig3(d.Seconds()) + "s"
	case d >= time.Millisecond:
		return sig3(ms(d)) + "ms"
	case d >= time.Microsecond:
		return sig3(float64(d)/float64(time.Microsecond)) + "µs"
	default:
		return fmt.Sprintf("%dns", int64(d))
	}
}

func sig3(f float64) string {
	switch {
	case f >= 100:
		return fmt.Sprintf("%.0f", f)
	case f >= 10:
		return fmt.Sprintf("%.1f", f)
	default:
		return fmt.Sprintf("%.2f", f)
	}
}
