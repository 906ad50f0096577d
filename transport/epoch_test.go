package transport

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/store"
)

// epochPeer is a fakePeer that records the sender's epoch of each call
// (limiter.SenderEpoch of its context) by method, and refuses every call
// with refuse when set.
type epochPeer struct {
	*fakePeer
	mu     sync.Mutex
	seen   map[string]uint64
	refuse error
}

func (p *epochPeer) note(ctx context.Context, method string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen[method] = limiter.SenderEpoch(ctx)
	return p.refuse
}

func (p *epochPeer) epochs() map[string]uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]uint64, len(p.seen))
	for k, v := range p.seen {
		out[k] = v
	}
	return out
}

func (p *epochPeer) CheckForwarded(ctx context.Context, from string, hops int, items []limiter.Forwarded, out []limiter.Answer) error {
	if err := p.note(ctx, "Check"); err != nil {
		return err
	}
	return p.fakePeer.CheckForwarded(ctx, from, hops, items, out)
}

func (p *epochPeer) AcquireForwarded(ctx context.Context, from string, hops int, item limiter.Forwarded, ttl time.Duration) (limiter.Answer, store.LeaseID, error) {
	if err := p.note(ctx, "Acquire"); err != nil {
		return limiter.Answer{}, store.LeaseID{}, err
	}
	return p.fakePeer.AcquireForwarded(ctx, from, hops, item, ttl)
}

func (p *epochPeer) ReleaseForwarded(ctx context.Context, from string, hops int, item limiter.Forwarded, id store.LeaseID) (limiter.Answer, bool, error) {
	if err := p.note(ctx, "Release"); err != nil {
		return limiter.Answer{}, false, err
	}
	return p.fakePeer.ReleaseForwarded(ctx, from, hops, item, id)
}

func (p *epochPeer) ReserveForwarded(ctx context.Context, from string, hops int, item limiter.Forwarded, ttl time.Duration) (limiter.Answer, store.LeaseID, error) {
	if err := p.note(ctx, "Reserve"); err != nil {
		return limiter.Answer{}, store.LeaseID{}, err
	}
	return p.fakePeer.ReserveForwarded(ctx, from, hops, item, ttl)
}

func (p *epochPeer) SettleForwarded(ctx context.Context, from string, hops int, item limiter.Forwarded, id store.LeaseID) (limiter.Answer, limiter.SettleAnswer, error) {
	if err := p.note(ctx, "Settle"); err != nil {
		return limiter.Answer{}, limiter.SettleAnswer{}, err
	}
	return p.fakePeer.SettleForwarded(ctx, from, hops, item, id)
}

func (p *epochPeer) FetchMoved(ctx context.Context, from string, hashes []uint64) ([]store.Entry, error) {
	_ = p.note(ctx, "Fetch")
	return p.fakePeer.FetchMoved(ctx, from, hashes)
}

func (p *epochPeer) AcceptHandoff(ctx context.Context, from string, entries []store.Entry, done []int) (int, error) {
	_ = p.note(ctx, "Handoff")
	return p.fakePeer.AcceptHandoff(ctx, from, entries, done)
}

func (p *epochPeer) AcceptReplicas(ctx context.Context, from string, entries []store.Entry) (int, error) {
	_ = p.note(ctx, "Replicate")
	return p.fakePeer.AcceptReplicas(ctx, from, entries)
}

func (p *epochPeer) AdminForwarded(ctx context.Context, from string, hops int, item limiter.Forwarded, op limiter.AdminOp) (limiter.KeyInfo, error) {
	if err := p.note(ctx, "Admin"); err != nil {
		return limiter.KeyInfo{}, err
	}
	return p.fakePeer.AdminForwarded(ctx, from, hops, item, op)
}

func (p *epochPeer) CheckAtomicForwarded(ctx context.Context, from string, hops int, items []limiter.Forwarded, out []limiter.Answer) error {
	if err := p.note(ctx, "CheckAtomic"); err != nil {
		return err
	}
	return p.fakePeer.CheckAtomicForwarded(ctx, from, hops, items, out)
}

// callEveryMethod makes one call of each limiter.Peers method that
// carries keys to m, and returns their errors by method.
func callEveryMethod(t *testing.T, c *PeerClient, ctx context.Context, p *epochPeer) map[string]error {
	t.Helper()
	m, _ := startPeerServer(t, "owner", p)
	it := limiter.Forwarded{Hash: 1, Limit: tbLimit(10), Cost: 1}
	errs := map[string]error{}
	out := make([]limiter.Answer, 1)
	errs["Check"] = c.Check(ctx, m, 0, []limiter.Forwarded{it}, out)
	errs["CheckAtomic"] = c.CheckAtomic(ctx, m, 0, []limiter.Forwarded{it}, out)
	_, _, errs["Acquire"] = c.Acquire(ctx, m, 0, limiter.Forwarded{Hash: 2, Limit: bucket.Limit{Algorithm: bucket.Concurrency, Limit: 2}, Cost: 1}, time.Minute)
	_, _, errs["Release"] = c.Release(ctx, m, 0, limiter.Forwarded{Hash: 2, Limit: bucket.Limit{Algorithm: bucket.Concurrency, Limit: 2}}, store.LeaseID{ID: 1, Tag: 1})
	_, _, errs["Reserve"] = c.Reserve(ctx, m, 0, it, time.Minute)
	_, _, errs["Settle"] = c.Settle(ctx, m, 0, it, store.LeaseID{ID: 1, Tag: 1})
	_, errs["Admin"] = c.Admin(ctx, m, 0, it, limiter.AdminOp{})
	_, errs["Fetch"] = c.Fetch(ctx, m, []uint64{1})
	e := store.Entry{Key: 3, Algorithm: bucket.TokenBucket, Token: bucket.TokenState{TAT: time.Now().UnixNano()}}
	errs["Handoff"] = c.Handoff(ctx, m, []store.Entry{e}, []int{1})
	errs["Replicate"] = c.Replicate(ctx, m, []store.Entry{e})
	return errs
}

// Every peer call that carries keys carries the sender's epoch
// (PeerClientConfig.Epoch), read by the receiver's limiter from the
// call's context; a client without Epoch sends 0 (unknown).
func TestPeerCallsCarryTheSendersEpoch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name  string
		epoch func() uint64
		want  uint64
	}{
		{"epoch 7", func() uint64 { return 7 }, 7},
		{"no epochs", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &epochPeer{fakePeer: newFakePeer(t, store.Config{}), seen: map[string]uint64{}}
			c := newTestPeerClient(t, PeerClientConfig{Self: "n1", Epoch: tc.epoch})
			for method, err := range callEveryMethod(t, c, ctx, p) {
				if err != nil {
					t.Errorf("%s: %v", method, err)
				}
			}
			got := p.epochs()
			for _, method := range []string{"Check", "CheckAtomic", "Acquire", "Release", "Reserve", "Settle", "Admin", "Fetch", "Handoff", "Replicate"} {
				if e, ok := got[method]; !ok || e != tc.want {
					t.Errorf("%s: the receiver saw epoch %d (called %v), want %d", method, e, ok, tc.want)
				}
			}
		})
	}
}

// A call the receiver refuses for its epoch comes back to the sender as
// the limiter.EpochError it was (a redirect with the receiver's epoch, or
// a receiver behind), on the stream of checks and on the unary calls:
// it wraps limiter.ErrNotSent (nothing applied), and does not open the
// circuit breaker (the peer answered).
func TestEpochRefusalsRoundTrip(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, refuse := range []*limiter.EpochError{{Epoch: 9, Ahead: true}, {Epoch: 3}} {
		p := &epochPeer{fakePeer: newFakePeer(t, store.Config{}), seen: map[string]uint64{}, refuse: refuse}
		c := newTestPeerClient(t, PeerClientConfig{Self: "n1", Epoch: func() uint64 { return 5 }, BreakerFailures: 1})
		for round := range 2 { // a second round: the breaker is still closed
			for _, method := range []string{"Check", "CheckAtomic", "Acquire", "Release", "Reserve", "Settle", "Admin"} {
				err := callEveryMethod(t, c, ctx, p)[method]
				var ee *limiter.EpochError
				// The stream of checks carries the receiver's epoch of a
				// redirect only (the sender of a call refused as behind
				// has nothing to wait for).
				if !errors.As(err, &ee) || ee.Ahead != refuse.Ahead || refuse.Ahead && ee.Epoch != refuse.Epoch || !errors.Is(err, limiter.ErrNotSent) || !errors.Is(err, limiter.ErrPeerUnavailable) {
					t.Errorf("round %d: %s refused with %+v: got %v, want that EpochError, not sent", round, method, *refuse, err)
				}
			}
		}
	}
}

// A request from a node of peer protocol 1 (no epoch field) is served
// with epoch 0: unknown, as before epochs.
func TestProtocolOneRequestHasEpochZero(t *testing.T) {
	p := &epochPeer{fakePeer: newFakePeer(t, store.Config{}), seen: map[string]uint64{}}
	m, _ := startPeerServer(t, "owner", p)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := &sluicev1.PeerCheckRequest{From: "n1", Items: []*sluicev1.PeerItem{tokenItem(1, 10, 1)}}
	if _, err := rawPeerClient(t, m).Check(ctx, req); err != nil {
		t.Fatal(err)
	}
	req.Epoch = 4
	if e := p.epochs()["Check"]; e != 0 {
		t.Errorf("a request without epoch: the receiver saw %d, want 0", e)
	}
	if _, err := rawPeerClient(t, m).Check(ctx, req); err != nil {
		t.Fatal(err)
	}
	if e := p.epochs()["Check"]; e != 4 {
		t.Errorf("a request with epoch 4: the receiver saw %d, want 4", e)
	}
}

// epochOf reads only a well-formed ErrorInfo of its domain: anything else
// (another code, another domain, a bad or missing epoch, a redirect to
// epoch 0) is no EpochError, and the call is an ordinary failure.
func TestEpochOfBadInput(t *testing.T) {
	good, _ := epochStatus(&limiter.EpochError{Epoch: 9, Ahead: true})
	if ee := epochOf(good.Err()); ee == nil || ee.Epoch != 9 || !ee.Ahead {
		t.Fatalf("epochOf(a redirect to 9) = %+v", ee)
	}
	for name, err := range map[string]error{
		"not a status":     errors.New("x"),
		"another code":     status.Error(codes.Unavailable, "x"),
		"aborted, no info": status.Error(codes.Aborted, "x"),
		"bad epoch":        infoErr(t, reasonEpochAhead, epochDomain, "nine"),
		"no epoch":         infoErr(t, reasonEpochAhead, epochDomain, ""),
		"redirect to 0":    infoErr(t, reasonEpochAhead, epochDomain, "0"),
		"another domain":   infoErr(t, reasonEpochAhead, "other", "9"),
		"another reason":   infoErr(t, "OTHER", epochDomain, "9"),
		"negative":         infoErr(t, reasonBehind, epochDomain, "-1"),
	} {
		if ee := epochOf(err); ee != nil {
			t.Errorf("%s: epochOf = %+v, want nil", name, ee)
		}
	}
}

// infoErr is an ABORTED status with an ErrorInfo of reason and domain
// whose metadata epoch is epoch ("" for none).
func infoErr(t *testing.T, reason, domain, epoch string) error {
	t.Helper()
	md := map[string]string{}
	if epoch != "" {
		md[epochKey] = epoch
	}
	st, err := status.New(codes.Aborted, "x").WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: domain, Metadata: md})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}
