package client

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/sluice-rl/sluice/internal/identity"
	"github.com/sluice-rl/sluice/internal/wire"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/ring"
)

// table is the client's view of the cluster, immutable once built and
// swapped in whole when membership changes: the ring as the nodes build it,
// a stream per member, and each policy's algorithm (part of a bucket's
// identity, so of its owner).
type table struct {
	ring     *ring.Ring // nil until learned
	byName   map[string]*nodeStream
	all      []*nodeStream // every member's stream, or the seeds' before the ring is known
	policies map[string]sluicev1.Algorithm
	// fingerprint identifies the members and ring config the table was
	// built from, so an unchanged answer rebuilds nothing.
	fingerprint string
}

// owner returns the stream of the node that owns it's bucket, if known and
// not down.
func (t *table) owner(it *sluicev1.CheckItem, now int64) (*nodeStream, bool) {
	if t.ring == nil {
		return nil, false
	}
	var h uint64
	if p := it.GetPolicy(); p != "" {
		alg, ok := t.policies[p]
		if !ok {
			return nil, false
		}
		h = identity.Policy(uint8(alg), p, it.GetKey())
	} else {
		l := it.GetLimit()
		alg := l.GetAlgorithm()
		if alg == sluicev1.Algorithm_ALGORITHM_UNSPECIFIED {
			alg = sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET
		}
		if c := l.GetCalendar(); c != sluicev1.Calendar_CALENDAR_UNSPECIFIED {
			zone := l.GetTimezone()
			if zone == "" {
				zone = "UTC" // as the node names it
			}
			h = identity.Calendar(uint8(alg), uint8(c), zone, it.GetKey())
		} else {
			h = identity.Inline(uint8(alg), l.GetPeriod().AsDuration(), it.GetKey())
		}
	}
	m, ok := t.ring.Owner(h)
	if !ok {
		return nil, false
	}
	ns := t.byName[m.Name]
	if ns == nil || ns.isDown(now) {
		return nil, false
	}
	return ns, true
}

// anyNode returns a node that is not down and not except, round-robin; if
// every node is down, any node but except (or except itself if alone).
func (c *Client) anyNode(t *table, except *nodeStream, now int64) *nodeStream {
	n := len(t.all)
	start := int(c.rr.Add(1))
	var fallback *nodeStream
	for i := 0; i < n; i++ {
		ns := t.all[(start+i)%n]
		if ns == except {
			continue
		}
		if !ns.isDown(now) {
			return ns
		}
		if fallback == nil {
			fallback = ns
		}
	}
	// Every member is down (or their advertised addresses are not
	// reachable from here): try the seeds the client was given.
	for i := range c.seeds {
		ns := c.seeds[(start+i)%len(c.seeds)]
		if ns != except && !ns.isDown(now) {
			return ns
		}
	}
	if fallback != nil {
		return fallback
	}
	return t.all[start%n]
}

// kick asks the refresher for a membership refresh soon; it never blocks.
func (c *Client) kick() {
	select {
	case c.kickCh <- struct{}{}:
	default:
	}
}

// refreshLoop keeps the table current: at start, every RefreshInterval,
// and soon after a kick (an answer from an unexpected owner, a stream
// that broke or drained), at most once per minRefreshGap.
func (c *Client) refreshLoop() {
	defer c.wg.Done()
	const minRefreshGap = 50 * time.Millisecond
	tick := time.NewTicker(c.refreshEvery)
	defer tick.Stop()
	first := true
	for {
		ctx, cancel := context.WithTimeout(c.ctx, c.timeout)
		if err := c.refresh(ctx); err == nil {
			c.refreshErr.Store("")
		} else if c.ctx.Err() == nil {
			c.refreshErr.Store(err.Error())
		}
		cancel()
		if first {
			close(c.firstRefresh)
			first = false
		}
		select {
		case <-c.ctx.Done():
			return
		case <-tick.C:
		case <-c.kickCh:
			t := time.NewTimer(minRefreshGap)
			select {
			case <-c.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// refresh asks a node (any, through the seeds' round-robin connection) for
// the members and rebuilds the table if they changed.
func (c *Client) refresh(ctx context.Context) error {
	c.stats.refreshes.Add(1)
	resp, err := sluicev1.NewMembershipClient(c.conn).Members(ctx, &sluicev1.MembersRequest{})
	if err != nil {
		return fmt.Errorf("client: members: %w", err)
	}
	var members []ring.Member
	for _, m := range resp.GetMembers() {
		// A member with no share is not on the answering node's ring
		// (e.g. it is leaving).
		if m.GetRingShare() > 0 && m.GetGrpcAddr() != "" {
			members = append(members, ring.Member{Name: m.GetName(), GRPCAddr: m.GetGrpcAddr()})
		}
	}
	if len(members) == 0 {
		return fmt.Errorf("client: members: %s answered no ring members", resp.GetNode())
	}
	slices.SortFunc(members, func(a, b ring.Member) int { return strings.Compare(a.Name, b.Name) })
	rc := resp.GetRing()
	cfg := ring.Config{PartitionCount: int(rc.GetPartitionCount()),
		ReplicationFactor: int(rc.GetReplicationFactor()), Load: rc.GetLoad()}
	var fp strings.Builder
	fmt.Fprintf(&fp, "%d/%d/%g", cfg.PartitionCount, cfg.ReplicationFactor, cfg.Load)
	for _, m := range members {
		fmt.Fprintf(&fp, ";%s=%s", m.Name, m.GRPCAddr)
	}
	old := c.table.Load()
	if old.ring != nil && old.fingerprint == fp.String() && maps.Equal(old.policies, resp.GetPolicies()) {
		return nil
	}
	var r *ring.Ring
	if old.ring != nil && old.fingerprint == fp.String() {
		r = old.ring
	} else if r, err = ring.New(cfg, members); err != nil {
		return fmt.Errorf("client: ring: %w", err)
	}
	t := &table{ring: r, byName: make(map[string]*nodeStream, len(members)),
		policies: resp.GetPolicies(), fingerprint: fp.String()}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errClosed
	}
	for _, m := range members {
		ns, err := c.streamLocked(m.Name, m.GRPCAddr)
		if err != nil {
			return err
		}
		t.byName[m.Name] = ns
		t.all = append(t.all, ns)
	}
	c.table.Store(t)
	// Close the streams of nodes that left, once idle (a later refresh
	// retries the busy ones).
	for key, ns := range c.streams {
		if t.byName[ns.name] != ns && ns.retireIfIdle() {
			delete(c.streams, key)
			_ = ns.conn.Close()
		}
	}
	return nil
}

// streamLocked returns the stream to name at addr, creating it. c.mu is
// held.
func (c *Client) streamLocked(name, addr string) (*nodeStream, error) {
	key := name + "\x00" + addr
	if ns, ok := c.streams[key]; ok {
		return ns, nil
	}
	conn, err := c.dial(addr)
	if err != nil {
		return nil, err
	}
	ns := newNodeStream(c, name, addr, conn)
	c.streams[key] = ns
	return ns, nil
}

// dial opens a connection to one node.
func (c *Client) dial(addr string) (*grpc.ClientConn, error) {
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(transportCreds(c.tls)),
		wire.DialOption(),
		// Fixed windows turn off gRPC's BDP estimation and its PINGs, as
		// on the nodes.
		grpc.WithInitialWindowSize(wire.FlowWindow),
		grpc.WithInitialConnWindowSize(wire.FlowWindow),
		// Reconnect soon after a node comes back: gRPC's default backoff
		// grows to 2 minutes, during which the node would be routed around.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 2 * time.Second,
		}),
	}, c.dialOpts...)
	conn, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return conn, nil
}
