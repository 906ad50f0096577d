package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/sluice-rl/sluice/internal/wire"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// ErrNoAddrs is returned by New when Config.Addrs is empty.
var ErrNoAddrs = errors.New("client: no node addresses")

// Config configures a Client.
type Config struct {
	// Addrs are host:port gRPC addresses of Sluice nodes (seeds): the
	// client learns the cluster's members from them. Any node answers for
	// any key.
	Addrs []string
	// Timeout bounds each call that has no deadline of its own; 0 means 2s.
	Timeout time.Duration
	// Grants, if set, turns on local token grants for hot keys.
	Grants *GrantOptions
	// DisableRouting sends each Check as one unary call to the seeds,
	// round-robin, which forward each check to its owner: the transport of
	// clients that cannot reach the nodes' advertised addresses. By default
	// the client learns the ring and sends each check straight to its
	// owner, coalescing concurrent checks into messages on one stream per
	// node.
	DisableRouting bool
	// RefreshInterval is how often the client asks for the members when
	// nothing suggests a change; 0 means 5s. An answer from an unexpected
	// owner, or a node that goes away, triggers a refresh at once.
	RefreshInterval time.Duration
	// MaxInflight bounds the messages awaiting answers on one node's
	// stream; checks queue behind them and go out together. 0 means 2.
	MaxInflight int
	// MaxBatch bounds the checks in one message; 0 means 500 (at most
	// 1000).
	MaxBatch int
	// TLS, if set, is the TLS configuration of every connection to the
	// nodes (their public gRPC port): RootCAs to verify them (nil: the
	// system's roots), Certificates or GetClientCertificate for mTLS,
	// ServerName when the nodes' certificates do not name the addresses
	// dialed. Nil means plaintext.
	TLS *tls.Config
	// DialOptions are added to the defaults (insecure credentials or TLS,
	// round-robin balancing, the vtprotobuf codec).
	DialOptions []grpc.DialOption
	// AdminToken, if set, is sent as "authorization: Bearer AdminToken"
	// with Inspect and Reset (a token of the nodes' --admin-token-file),
	// and with no other call.
	AdminToken string
}

// serviceConfig spreads calls round-robin over the nodes and retries a call
// that failed with UNAVAILABLE (a node going away) on another node. Sluice
// servers never answer UNAVAILABLE themselves, so a retried check was not
// applied, except in the rare case of a connection lost mid-call.
const serviceConfig = `{
  "loadBalancingConfig": [{"round_robin": {}}],
  "methodConfig": [{
    "name": [{"service": "sluice.v1.RateLimiter"}, {"service": "sluice.v1.Membership"}],
    "retryPolicy": {
      "maxAttempts": 3,
      "initialBackoff": "0.01s",
      "maxBackoff": "0.1s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }]
}`

// transportCreds is TLS with cfg, or plaintext without.
func transportCreds(cfg *tls.Config) credentials.TransportCredentials {
	if cfg == nil {
		return insecure.NewCredentials()
	}
	cfg = cfg.Clone()
	if cfg.MinVersion < tls.VersionTLS12 {
		cfg.MinVersion = tls.VersionTLS12
	}
	return credentials.NewTLS(cfg)
}

// Client talks to a Sluice cluster. It is safe for concurrent use.
type Client struct {
	conn  *grpc.ClientConn // round-robin over the seeds
	api   sluicev1.RateLimiterClient
	admin sluicev1.AdminClient
	// adminToken: Config.AdminToken.
	adminToken string
	timeout    time.Duration
	grants     *grants // nil without Config.Grants
	routing    bool
	dialOpts   []grpc.DialOption
	tls        *tls.Config // Config.TLS; nil: plaintext

	// Routing (see route.go and stream.go).
	ctx          context.Context // cancelled by Close
	cancel       context.CancelFunc
	wg           sync.WaitGroup
	maxBatch     int
	maxInflight  int
	refreshEvery time.Duration
	kickCh       chan struct{}
	table        atomic.Pointer[table]
	rr           atomic.Uint64
	stats        streamStats
	refreshErr   atomic.Value // string: the last refresh's error, "" after a success
	seeds        []*nodeStream
	firstRefresh chan struct{} // closed once the first refresh is over

	mu      sync.Mutex
	closed  bool
	streams map[string]*nodeStream // by name and address
}

// New connects lazily to the nodes in cfg.Addrs.
func New(cfg Config) (*Client, error) {
	if len(cfg.Addrs) == 0 {
		return nil, ErrNoAddrs
	}
	if cfg.MaxBatch < 0 || cfg.MaxBatch > 1000 {
		return nil, fmt.Errorf("client: MaxBatch %d: must be 0 to 1000", cfg.MaxBatch)
	}
	if cfg.MaxInflight < 0 || cfg.RefreshInterval < 0 {
		return nil, errors.New("client: MaxInflight and RefreshInterval must not be negative")
	}
	r := manual.NewBuilderWithScheme("sluice")
	addrs := make([]resolver.Address, len(cfg.Addrs))
	for i, a := range cfg.Addrs {
		addrs[i] = resolver.Address{Addr: a}
		if cfg.TLS != nil {
			// Verify each node by the host it is dialed at, as the
			// per-node connections do, rather than by the resolver's
			// authority.
			if host, _, err := net.SplitHostPort(a); err == nil {
				addrs[i].ServerName = host
			}
		}
	}
	r.InitialState(resolver.State{Addresses: addrs})
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(transportCreds(cfg.TLS)),
		grpc.WithResolvers(r),
		grpc.WithDefaultServiceConfig(serviceConfig),
		wire.DialOption(),
	}, cfg.DialOptions...)
	conn, err := grpc.NewClient(r.Scheme()+":///sluice", opts...)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	t := cfg.Timeout
	if t <= 0 {
		t = 2 * time.Second
	}
	c := &Client{conn: conn, api: sluicev1.NewRateLimiterClient(conn), admin: sluicev1.NewAdminClient(conn), adminToken: cfg.AdminToken, timeout: t, grants: newGrants(cfg.Grants),
		routing: !cfg.DisableRouting, dialOpts: cfg.DialOptions, tls: cfg.TLS,
		maxBatch: cfg.MaxBatch, maxInflight: cfg.MaxInflight, refreshEvery: cfg.RefreshInterval,
		kickCh: make(chan struct{}, 1), streams: map[string]*nodeStream{}, firstRefresh: make(chan struct{})}
	if c.maxBatch == 0 {
		c.maxBatch = 500
	}
	if c.maxInflight == 0 {
		c.maxInflight = 2
	}
	if c.refreshEvery == 0 {
		c.refreshEvery = 5 * time.Second
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if c.routing {
		// Until the ring is known, checks go to the seeds, which forward.
		first := &table{}
		for _, a := range cfg.Addrs {
			sc, err := c.dial(a)
			if err != nil {
				_ = c.Close()
				return nil, err
			}
			ns := newNodeStream(c, "", a, sc)
			c.seeds = append(c.seeds, ns)
			first.all = append(first.all, ns)
		}
		c.table.Store(first)
		c.wg.Add(1)
		go c.refreshLoop()
	}
	return c, nil
}

// Close stops background work (grant refills, membership refreshes) and
// closes the connections. Checks in flight fail.
func (c *Client) Close() error {
	if c.grants != nil {
		// Give unspent grant tokens back while the connections are up.
		ctx, cancel := c.withTimeout(context.Background())
		c.grants.holder.Return(ctx, time.Now().UnixNano())
		cancel()
		c.grants.holder.Close()
	}
	c.mu.Lock()
	c.closed = true
	streams := slices.Collect(maps.Values(c.streams))
	c.mu.Unlock()
	streams = append(streams, c.seeds...)
	for _, ns := range streams {
		ns.close(errClosed)
	}
	c.cancel()
	c.wg.Wait()
	for _, ns := range streams {
		_ = ns.conn.Close()
	}
	return c.conn.Close()
}

// Stats counts what the client's transport did.
type Stats struct {
	// Messages and Items are the stream messages sent and the checks they
	// carried (Items/Messages is the mean batch).
	Messages, Items int64
	// Queued counts calls that waited for a free slot instead of being
	// sent at once.
	Queued int64
	// Retries counts checks sent again to another node after theirs failed.
	Retries int64
	// Misrouted counts answers from an owner other than the node the check
	// was sent to (the node forwarded it): the client's ring was stale.
	Misrouted int64
	// Refreshes counts membership requests.
	Refreshes int64
	// Members is the number of nodes on the client's ring (0 until known).
	Members int
	// RefreshError is why the last membership refresh failed, "" if it
	// succeeded (checks then go to the seeds or to a stale ring).
	RefreshError string
}

// Stats returns the transport's counters.
func (c *Client) Stats() Stats {
	s := Stats{Messages: c.stats.messages.Load(), Items: c.stats.items.Load(), Queued: c.stats.queued.Load(),
		Retries: c.stats.retries.Load(), Misrouted: c.stats.misrouted.Load(), Refreshes: c.stats.refreshes.Load()}
	if t := c.table.Load(); t != nil && t.ring != nil {
		s.Members = t.ring.Len()
	}
	s.RefreshError, _ = c.refreshErr.Load().(string)
	return s
}

// withTimeout bounds ctx by the client's Timeout unless it has a deadline
// of its own.
func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.timeout)
}
