package logcap_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluice-rl/sluice/internal/logcap"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newLogger(t *testing.T, cfg logcap.Config) (*slog.Logger, *bytes.Buffer, *prometheus.Registry, *fakeClock) {
	t.Helper()
	var buf bytes.Buffer
	clk := &fakeClock{t: time.Unix(1000, 0)}
	reg := prometheus.NewRegistry()
	cfg.Clock, cfg.Registerer = clk.now, reg
	h, err := logcap.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return slog.New(h), &buf, reg, clk
}

func lines(buf *bytes.Buffer) []string {
	s := strings.TrimSpace(buf.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// A flood of one WARN writes one line a second, the next carrying the
// number suppressed; every record is counted.
func TestFloodOneLinePerSecond(t *testing.T) {
	log, buf, reg, clk := newLogger(t, logcap.Config{})
	log = log.With("node", "n1") // derived loggers share the caps
	for range 1000 {
		log.Warn("refused: in-flight cap", "conn", "1.2.3.4:5")
	}
	if got := lines(buf); len(got) != 1 || strings.Contains(got[0], "suppressed") {
		t.Fatalf("after 1000 records in one instant: %q, want one line without a count", got)
	}
	clk.add(999 * time.Millisecond)
	log.Warn("refused: in-flight cap")
	if n := len(lines(buf)); n != 1 {
		t.Fatalf("%d lines 999ms later, want 1", n)
	}
	clk.add(time.Millisecond)
	log.Warn("refused: in-flight cap")
	got := lines(buf)
	if len(got) != 2 || !strings.Contains(got[1], "suppressed=1000") || !strings.Contains(got[1], "node=n1") {
		t.Fatalf("a second later: %q, want a second line with suppressed=1000", got)
	}
	if v := testutil.ToFloat64(mustVec(t, reg, "sluice_log_lines_total", "WARN", "refused: in-flight cap")); v != 1002 {
		t.Errorf("lines_total %v, want 1002", v)
	}
	if v := testutil.ToFloat64(mustVec(t, reg, "sluice_log_suppressed_total", "refused: in-flight cap")); v != 1000 {
		t.Errorf("suppressed_total %v, want 1000", v)
	}
}

// Reasons are capped apart: one flooding does not silence another.
func TestReasonsApart(t *testing.T) {
	log, buf, _, _ := newLogger(t, logcap.Config{})
	for range 100 {
		log.Error("a failed")
		log.Warn("b refused")
	}
	if n := len(lines(buf)); n != 2 {
		t.Fatalf("%d lines, want one per reason: %q", n, lines(buf))
	}
}

// INFO and DEBUG pass untouched unless marked as refusals.
func TestBelowWarn(t *testing.T) {
	log, buf, reg, _ := newLogger(t, logcap.Config{})
	for range 10 {
		log.Info("serving")
		log.Debug("swept")
	}
	if n := len(lines(buf)); n != 20 {
		t.Fatalf("%d lines, want all 20", n)
	}
	buf.Reset()
	for range 10 {
		log.Info("connection refused", slog.Bool(logcap.Refusal, true))
	}
	if n := len(lines(buf)); n != 1 {
		t.Fatalf("%d refusal lines, want 1", n)
	}
	if v := testutil.ToFloat64(mustVec(t, reg, "sluice_log_lines_total", "INFO", "connection refused")); v != 10 {
		t.Errorf("lines_total %v, want 10", v)
	}
}

// Past MaxReasons distinct messages, the rest share "other": the label
// cardinality stays bounded.
func TestReasonsCapped(t *testing.T) {
	log, buf, reg, _ := newLogger(t, logcap.Config{MaxReasons: 3})
	for i := range 50 {
		log.Warn(fmt.Sprintf("reason %d", i))
	}
	if n := len(lines(buf)); n != 4 {
		t.Fatalf("%d lines, want 3 reasons and one other: %q", n, lines(buf))
	}
	if n := testutil.CollectAndCount(reg, "sluice_log_lines_total"); n != 4 {
		t.Errorf("%d series, want 4", n)
	}
	if v := testutil.ToFloat64(mustVec(t, reg, "sluice_log_lines_total", "WARN", logcap.OtherReason)); v != 47 {
		t.Errorf("other %v, want 47", v)
	}
}

func TestConfigErrors(t *testing.T) {
	for field, c := range map[string]struct {
		next slog.Handler
		cfg  logcap.Config
	}{
		"next":       {nil, logcap.Config{}},
		"Every":      {slog.DiscardHandler, logcap.Config{Every: -1}},
		"MaxReasons": {slog.DiscardHandler, logcap.Config{MaxReasons: -1}},
	} {
		_, err := logcap.New(c.next, c.cfg)
		if !errors.Is(err, logcap.ErrConfig) || !strings.Contains(err.Error(), field+":") {
			t.Errorf("%s: %v, want ErrConfig naming it", field, err)
		}
	}
}

func mustVec(t *testing.T, reg *prometheus.Registry, name string, labels ...string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			ok := len(m.GetLabel()) == len(labels)
			for i, l := range m.GetLabel() {
				ok = ok && l.GetValue() == labels[i]
			}
			if ok {
				return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "x", Help: "x"}, func() float64 { return m.GetCounter().GetValue() })
			}
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return nil
}
