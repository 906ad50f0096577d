package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// RLSConfig configures a Target that calls Envoy's rate limit service,
// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit, as Envoy
// does: Sluice's (`sluice serve --rls-config`) or envoyproxy/ratelimit.
type RLSConfig struct {
	// Addrs are the servers' gRPC addresses; calls go to them in turn, as
	// Envoy's to a cluster of rate limit services (a server that does not
	// own a descriptor forwards it).
	Addrs []string
	// Domain is the requests' domain; "" means "bench".
	Domain string
	// Key is the descriptor entry's key; its value is the bench's key. ""
	// means "key".
	Key string
	// Conns is the number of gRPC connections in all, spread over Addrs in
	// turn; 0 means one per address.
	Conns int
	// TLS, if set, is the TLS configuration of the connections; nil means
	// plaintext.
	TLS *tls.Config
	// Owner, if set, makes the target a ring-aware caller: each call goes
	// to the address Owner gives for the counter key (RLSCounterKey) of
	// most of its descriptors (the first of them on a tie), over one
	// connection per address, rather than to Addrs in turn. An error
	// fails the call. SluiceRLSOwner is Sluice's.
	Owner func(ctx context.Context, counterKey string) (addr string, err error)
}

func (c RLSConfig) withDefaults() RLSConfig {
	if c.Domain == "" {
		c.Domain = "bench"
	}
	if c.Key == "" {
		c.Key = "key"
	}
	if c.Conns == 0 {
		c.Conns = len(c.Addrs)
	}
	return c
}

// RLSConfigYAML is the ratelimit configuration (envoyproxy/ratelimit's
// format) that the servers of an RLS Target need: every value of cfg's key
// in cfg's domain limited to limit per unit ("second", "minute", "hour" or
// "day").
func RLSConfigYAML(cfg RLSConfig, limit int64, unit string) string {
	cfg = cfg.withDefaults()
	return fmt.Sprintf("domain: %s\ndescriptors:\n  - key: %s\n    rate_limit:\n      unit: %s\n      requests_per_unit: %d\n",
		cfg.Domain, cfg.Key, unit, limit)
}

// RLSUnit is the ratelimit unit of a period, or an error if the period is
// not one of a second, a minute, an hour or a day.
func RLSUnit(period time.Duration) (string, error) {
	switch period {
	case time.Second:
		return "second", nil
	case time.Minute:
		return "minute", nil
	case time.Hour:
		return "hour", nil
	case 24 * time.Hour:
		return "day", nil
	}
	return "", fmt.Errorf("%w: an RLS period must be 1s, 1m, 1h or 24h, not %s", ErrInvalid, period)
}

// RLSAuditBurst is the burst to give Config for an RLS run's audit: a fixed
// window admits up to limit in each window a run touches, ceil(W)+1 of
// them in W periods, which the token-bucket bound burst + limit × W covers
// with a burst of 2 × limit.
func RLSAuditBurst(limit int64) int64 { return 2 * limit }

// rlsTarget calls ShouldRateLimit with one descriptor per key.
type rlsTarget struct {
	cfg   RLSConfig
	creds credentials.TransportCredentials
	conns []*grpc.ClientConn
	apis  []rlspb.RateLimitServiceClient
	next  atomic.Uint64
	reqs  sync.Pool // *rlsRequest
	// owners are the connections to the owners (RLSConfig.Owner), by
	// address.
	mu     sync.Mutex
	owners map[string]rlspb.RateLimitServiceClient
}

// rlsRequest is a request with its descriptors, reused across calls.
type rlsRequest struct {
	req     rlspb.RateLimitRequest
	descs   []*rlv3.RateLimitDescriptor
	entries []rlv3.RateLimitDescriptor_Entry
	entryP  []*rlv3.RateLimitDescriptor_Entry
	dvals   []rlv3.RateLimitDescriptor
}

// NewRLSTarget is a Target whose checks are ShouldRateLimit calls: each
// key is a descriptor [{Key: key}], allowed when its status is OK. A status
// without a current limit (the descriptor matched no rule: the servers
// lack RLSConfigYAML's configuration) is an error.
func NewRLSTarget(cfg RLSConfig) (Target, error) {
	if len(cfg.Addrs) == 0 && cfg.Owner == nil {
		return nil, fmt.Errorf("%w: RLS: no address (and no Owner)", ErrInvalid)
	}
	if cfg.Conns < 0 {
		return nil, fmt.Errorf("%w: RLS: conns must be >= 0", ErrInvalid)
	}
	cfg = cfg.withDefaults()
	t := &rlsTarget{cfg: cfg, creds: insecure.NewCredentials(), owners: map[string]rlspb.RateLimitServiceClient{}}
	if cfg.TLS != nil {
		t.creds = credentials.NewTLS(cfg.TLS)
	}
	if cfg.Owner != nil {
		return t, nil
	}
	for i := range cfg.Conns {
		conn, err := grpc.NewClient(cfg.Addrs[i%len(cfg.Addrs)], grpc.WithTransportCredentials(t.creds))
		if err != nil {
			t.Close()
			return nil, err
		}
		t.conns = append(t.conns, conn)
		t.apis = append(t.apis, rlspb.NewRateLimitServiceClient(conn))
	}
	return t, nil
}

func (t *rlsTarget) request(keys []string) *rlsRequest {
	r, _ := t.reqs.Get().(*rlsRequest)
	if r == nil {
		r = &rlsRequest{}
	}
	n := len(keys)
	if cap(r.descs) < n {
		r.descs = make([]*rlv3.RateLimitDescriptor, n)
		r.dvals = make([]rlv3.RateLimitDescriptor, n)
		r.entries = make([]rlv3.RateLimitDescriptor_Entry, n)
		r.entryP = make([]*rlv3.RateLimitDescriptor_Entry, n)
	}
	r.descs, r.dvals, r.entries, r.entryP = r.descs[:n], r.dvals[:n], r.entries[:n], r.entryP[:n]
	for i, k := range keys {
		r.entries[i].Key, r.entries[i].Value = t.cfg.Key, k
		r.entryP[i] = &r.entries[i]
		r.dvals[i].Entries = r.entryP[i : i+1 : i+1]
		r.descs[i] = &r.dvals[i]
	}
	r.req.Domain = t.cfg.Domain
	r.req.Descriptors = r.descs
	return r
}

func (t *rlsTarget) Check(ctx context.Context, keys []string, allowed []bool) error {
	var api rlspb.RateLimitServiceClient
	if t.cfg.Owner == nil {
		api = t.apis[t.next.Add(1)%uint64(len(t.apis))]
	} else {
		var err error
		if api, err = t.owner(ctx, keys); err != nil {
			return err
		}
	}
	r := t.request(keys)
	resp, err := api.ShouldRateLimit(ctx, &r.req)
	t.reqs.Put(r)
	if err != nil {
		return err
	}
	if len(resp.Statuses) != len(keys) {
		return fmt.Errorf("bench: RLS: %d statuses for %d descriptors", len(resp.Statuses), len(keys))
	}
	for i, s := range resp.Statuses {
		if s.CurrentLimit == nil {
			return fmt.Errorf("bench: RLS: descriptor %s=%s in domain %q matched no rule: does the server have the bench's config (sluice bench --rls --print-rls-config)?",
				t.cfg.Key, keys[i], t.cfg.Domain)
		}
		allowed[i] = s.Code == rlspb.RateLimitResponse_OK
	}
	return nil
}

func (t *rlsTarget) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	for _, c := range t.conns {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
