package xds_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"

	"github.com/sluice-rl/sluice/rls"
	"github.com/sluice-rl/sluice/rls/xds"
	"github.com/sluice-rl/sluice/rls/xds/xdstest"
)

// applied records the configurations a Client applies and rejects.
type applied struct {
	mu       sync.Mutex
	configs  []*rls.Config
	rejected []error
}

func (a *applied) apply(c *rls.Config) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.configs = append(a.configs, c)
}

func (a *applied) reject(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rejected = append(a.rejected, err)
}

func (a *applied) count() (applied, rejected int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.configs), len(a.rejected)
}

// startClient runs a Client against srv until the test ends.
func startClient(t *testing.T, srv *xdstest.Server, edit func(*xds.Settings)) (*xds.Client, *applied) {
	t.Helper()
	s := xds.DefaultSettings()
	s.ServerURL, s.NodeID = srv.Addr, "sluice-test"
	s.BackoffInitial, s.BackoffMax, s.ConnectRetryInterval = 10*time.Millisecond, 50*time.Millisecond, 10*time.Millisecond
	if edit != nil {
		edit(&s)
	}
	a := &applied{}
	c, err := xds.New(xds.Config{Settings: s, Apply: a.apply, Rejected: a.reject,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return c, a
}

func perSecond(domain, key string, n uint32) *rlsconf.RateLimitConfig {
	return &rlsconf.RateLimitConfig{Name: domain, Domain: domain, Descriptors: []*rlsconf.RateLimitDescriptor{{
		Key: key, RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_SECOND, RequestsPerUnit: n}}}}
}

// A pushed configuration is applied and ACKed; a push that rls rejects is
// NACKed with the error naming the resource and the field, and the one in
// force stays; the next valid push applies again.
func TestClientAppliesAcksAndNacks(t *testing.T) {
	srv := xdstest.Start(t, "sluice-test")
	srv.Push(t, "1", perSecond("edge", "ip", 10))
	c, a := startClient(t, srv, nil)
	srv.WaitAcked(t, "1")
	if got := c.Config(); got == nil || !got.HasDomain("edge") {
		t.Fatalf("config after v1: %v", got)
	}
	first := c.Config()

	bad := perSecond("edge", "ip", 10)
	bad.Descriptors[0].RateLimit.Unit = rlsconf.RateLimitUnit_UNKNOWN
	srv.Push(t, "2", bad)
	srv.WaitNacks(t, 1)
	nack := srv.Nacks()[0]
	for _, want := range []string{"xds:edge", "descriptors[0].rate_limit.unit", "invalid rate limit unit 'UNKNOWN'"} {
		if !strings.Contains(nack, want) {
			t.Errorf("NACK %q does not name %q", nack, want)
		}
	}
	if c.Config() != first || srv.Acked() != "1" {
		t.Errorf("after the NACK: config changed or acked %q", srv.Acked())
	}
	if n, r := a.count(); n != 1 || r != 1 {
		t.Errorf("applied %d, rejected %d; want 1 and 1", n, r)
	}

	srv.Push(t, "3", perSecond("edge", "ip", 10), perSecond("api", "user", 5))
	srv.WaitAcked(t, "3")
	if got := c.Config(); !got.HasDomain("api") || !got.HasDomain("edge") {
		t.Errorf("config after v3: domains %v", got.Domains())
	}
}

// The same configuration pushed under a new version is ACKed without
// being applied again.
func TestClientUnchangedNotApplied(t *testing.T) {
	srv := xdstest.Start(t, "sluice-test")
	srv.Push(t, "1", perSecond("edge", "ip", 10))
	_, a := startClient(t, srv, nil)
	srv.WaitAcked(t, "1")
	srv.Push(t, "2", perSecond("edge", "ip", 10))
	srv.WaitAcked(t, "2")
	if n, _ := a.count(); n != 1 {
		t.Errorf("applied %d times, want 1", n)
	}
}

// A stream the server ends is opened again after the backoff, and the
// configuration arrives on the new one.
func TestClientReconnects(t *testing.T) {
	srv := xdstest.Start(t, "sluice-test")
	srv.FailStreams(2)
	srv.Push(t, "1", perSecond("edge", "ip", 10))
	c, _ := startClient(t, srv, nil)
	srv.WaitAcked(t, "1")
	if n := srv.Streams(); n < 3 {
		t.Errorf("streams opened: %d, want 3 (two refused)", n)
	}
	if c.Config() == nil {
		t.Error("no config")
	}
}

func TestNewRequiresApply(t *testing.T) {
	_, err := xds.New(xds.Config{Settings: xds.DefaultSettings()})
	if !errors.Is(err, xds.ErrInvalidSettings) || !strings.Contains(err.Error(), "Apply") {
		t.Errorf("New without Apply: %v", err)
	}
}
