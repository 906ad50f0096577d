package transport

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/internal/wire"
	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/store"
)

// PeerService is what the peer API needs from the limiter;
// (*limiter.Limiter) satisfies it. from is the calling node's name and hops
// the number of earlier forwards of the items. Implementations must be
// safe for concurrent use. A call whose from is not a node the service
// takes peer calls from fails with an error wrapping limiter.ErrNotMember,
// which the server answers with PermissionDenied.
type PeerService interface {
	CheckForwarded(ctx context.Context, from string, hops int, items []limiter.Forwarded, out []limiter.Answer) error
	AcquireForwarded(ctx context.Context, from string, hops int, item limiter.Forwarded, ttl time.Duration) (limiter.Answer, store.LeaseID, error)
	ReleaseForwarded(ctx context.Context, from string, hops int, item limiter.Forwarded, leaseID store.LeaseID) (limiter.Answer, bool, error)
	ReserveForwarded(ctx context.Context, from string, hops int, item limiter.Forwarded, ttl time.Duration) (limiter.Answer, store.LeaseID, error)
	SettleForwarded(ctx context.Context, from string, hops int, item limiter.Forwarded, id store.LeaseID) (limiter.Answer, limiter.SettleAnswer, error)
	FetchMoved(ctx context.Context, from string, hashes []uint64) ([]store.Entry, error)
	AcceptHandoff(ctx context.Context, from string, entries []store.Entry, donePartitions []int) (int, error)
	AcceptReplicas(ctx context.Context, from string, entries []store.Entry) (int, error)
	AdminForwarded(ctx context.Context, from string, hops int, item limiter.Forwarded, op limiter.AdminOp) (limiter.KeyInfo, error)
	CheckAtomicForwarded(ctx context.Context, from string, hops int, items []limiter.Forwarded, out []limiter.Answer) error
}

var _ PeerService = (*limiter.Limiter)(nil)

// Bounds on peer requests. The client never exceeds them; the server
// refuses larger requests with InvalidArgument.
const (
	// MaxPeerBatch is the most items in one peer Check request (and the
	// largest PeerClientConfig.MaxBatch).
	MaxPeerBatch = wire.MaxPeerBatch
	// maxPeerHashes is the most hashes in one Fetch request.
	maxPeerHashes = 65536
	// MaxHandoffStates is the most states in one Handoff request;
	// PeerClient.Handoff splits larger handoffs into several calls.
	MaxHandoffStates = wire.MaxHandoffStates
	// maxDonePartitions is the most done_partitions in one Handoff
	// request: more than any ring's partition count.
	maxDonePartitions = 1 << 16
	// maxPeerHops bounds a request's hop count; the limiter forwards once
	// more at most, so anything larger is a bug or a loop.
	maxPeerHops = 16
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// Service answers the peer calls; (*limiter.Limiter) satisfies it.
	// Required.
	Service PeerService
	// Self is this node's name, returned as the owner of every answer.
	// Required.
	Self string
	// Metrics records the latency of the calls served, as
	// sluice_peer_served_duration_seconds{method}; nil records nothing.
	Metrics *PeerMetrics
	// Recovery logs and counts a panic in a CheckStream goroutine (the
	// gRPC server's interceptors, wire.Recovery.ServerOptions, cover the
	// handlers themselves); nil logs to slog.Default().
	Recovery *wire.Recovery
	// Limits, if not nil, admit CheckStream's messages (the in-flight
	// budgets of their connection and of the listener, memory shedding)
	// and run them on the listener's pool; the gRPC server's options that
	// enforce the rest are Limits.ServerOptions, the node's to install.
	Limits *wire.Limits
	// Raft takes the Raft messages peers send over Peer.Raft (see
	// RaftReceiver); nil answers Peer.Raft with Unimplemented.
	Raft RaftReceiver
}

// Server serves the node-to-node service sluice.v1.Peer. It is registered
// on a gRPC server of its own registration (Register), apart from the
// public API, so that a node can put it on its own listener or behind
// peer-only authentication.
//
// A zero Acquire ttl_ns means limiter.DefaultLeaseTTL.
//
// Check validates every item and answers an invalid one with a per-item
// InvalidArgument error naming the field (items[i].limit.period_ns, ...),
// so that one bad item never fails the other callers' items coalesced into
// the same request; the valid items are applied. Acquire, Release, Fetch
// and Handoff fail the whole call with InvalidArgument (and a BadRequest
// detail) on bad input.
type Server struct {
	ps    *peerServer
	drain context.CancelFunc
}

// NewServer builds the peer service.
func NewServer(cfg ServerConfig) (*Server, error) {
	switch {
	case cfg.Service == nil:
		return nil, fmt.Errorf("%w: ServerConfig.Service: is required", ErrInvalidConfig)
	case cfg.Self == "":
		return nil, fmt.Errorf("%w: ServerConfig.Self: must not be empty", ErrInvalidConfig)
	}
	drainCtx, drain := context.WithCancel(context.Background())
	ps := &peerServer{svc: cfg.Service, name: cfg.Self, drain: drainCtx, recovery: cfg.Recovery, limits: cfg.Limits,
		raft: cfg.Raft}
	for i, method := range peerMethods {
		ps.obs[i] = cfg.Metrics.peerServedObserver(method)
	}
	return &Server{ps: ps, drain: drain}, nil
}

// Register registers sluice.v1.Peer on r. Call it before r serves.
func (s *Server) Register(r grpc.ServiceRegistrar) { sluicev1.RegisterPeerServer(r, s.ps) }

// Drain asks every peer with an open Peer.CheckStream or Peer.Raft
// stream, and every peer that opens one later, to close it; the calls it sent are still
// answered. Call it before the gRPC server's GracefulStop, which waits for
// streams to end.
func (s *Server) Drain() { s.drain() }

// The peer methods, indexing per-method metrics.
const (
	peerCheck = iota
	peerAcquire
	peerRelease
	peerFetch
	peerHandoff
	peerRaft
	peerReserve
	peerSettle
	peerAdmin
	peerCheckAtomic
	numPeerMethods
)

var peerMethods = [numPeerMethods]string{"Check", "Acquire", "Release", "Fetch", "Handoff", "Raft", "Reserve", "Settle", "Admin", "CheckAtomic"}

// peerServer implements sluicev1.PeerServer over a PeerService.
type peerServer struct {
	sluicev1.UnimplementedPeerServer
	svc  PeerService
	name string
	// zones caches the zones of forwarded calendar limits.
	zones bucket.Zones
	obs   [numPeerMethods]prometheus.Observer
	// drain ends when CheckStream clients are asked to go away; nil if
	// never.
	drain    context.Context
	recovery *wire.Recovery
	limits   *wire.Limits // nil: none
	raft     RaftReceiver // nil: none
}

func (s *peerServer) observe(method int, start time.Time) {
	s.obs[method].Observe(time.Since(start).Seconds())
}

// peerHops validates a request's hop count.
func peerHops(h uint32) (int, error) {
	if h > maxPeerHops {
		return 0, wire.InvalidArgument("hops", fmt.Sprintf("%d, at most %d", h, maxPeerHops))
	}
	return int(h), nil
}

// peerFieldPath joins a prefix ("items[3]") and a field relative to it.
func peerFieldPath(prefix, field string) string {
	if field == "" {
		return prefix
	}
	if prefix == "" {
		return field
	}
	return prefix + "." + field
}

func (s *peerServer) Check(ctx context.Context, req *sluicev1.PeerCheckRequest) (*sluicev1.PeerCheckResponse, error) {
	defer s.observe(peerCheck, time.Now())
	hops, err := peerHops(req.GetHops())
	if err != nil {
		return nil, err
	}
	items := req.GetItems()
	if len(items) > MaxPeerBatch {
		return nil, wire.InvalidArgument("items", fmt.Sprintf("%d items, at most %d per call", len(items), MaxPeerBatch))
	}
	ctx, cancel, err := callDeadline(ctx, req.GetTimeoutNs())
	if err != nil {
		return nil, err
	}
	defer cancel()
	resp := &sluicev1.PeerCheckResponse{Owner: s.name}
	if len(items) == 0 {
		return resp, nil
	}
	fw := make([]limiter.Forwarded, len(items))
	ans := make([]limiter.Answer, len(items))
	var bad map[int]error // invalid items; nil on the normal path
	for i, it := range items {
		if fe := fromPeerItem(&fw[i], it, &s.zones); fe != nil {
			if bad == nil {
				bad = make(map[int]error)
			}
			field := peerFieldPath(fmt.Sprintf("items[%d]", i), fe.Field)
			bad[i] = status.Error(codes.InvalidArgument, field+": "+fe.Reason)
		}
	}
	if bad == nil {
		if err := s.svc.CheckForwarded(limiter.WithSenderEpoch(ctx, req.GetEpoch()), req.GetFrom(), hops, fw, ans); err != nil {
			return nil, peerStatus(err)
		}
	} else if len(bad) < len(items) {
		// Apply the valid items only: compact them to the front, then
		// spread their answers back to their positions (from the end,
		// since an item only moves towards the front).
		idx := make([]int, 0, len(items)-len(bad))
		for i := range fw {
			if _, ok := bad[i]; !ok {
				fw[len(idx)] = fw[i]
				idx = append(idx, i)
			}
		}
		n := len(idx)
		if err := s.svc.CheckForwarded(limiter.WithSenderEpoch(ctx, req.GetEpoch()), req.GetFrom(), hops, fw[:n], ans[:n]); err != nil {
			return nil, peerStatus(err)
		}
		for j := n - 1; j >= 0; j-- {
			if idx[j] != j {
				ans[idx[j]] = ans[j]
			}
		}
	}
	for i, err := range bad {
		ans[i] = limiter.Answer{Err: err}
	}
	// One allocation for the results, one for their pointers.
	out := make([]sluicev1.PeerResult, len(ans))
	resp.Results = make([]*sluicev1.PeerResult, len(ans))
	for i := range ans {
		resp.Results[i] = toPeerResult(&out[i], &ans[i])
	}
	return resp, nil
}

// callDeadline bounds ctx by the sender's wait for a Check answer
// (PeerCheckRequest.timeout_ns; 0: none), less a tenth for the answer's
// way back, so that the limiter applies no item after the sender has
// given up on it (and answered it by its failure mode): a stream message
// has no deadline of its own.
func callDeadline(ctx context.Context, timeoutNs int64) (context.Context, context.CancelFunc, error) {
	switch {
	case timeoutNs < 0:
		return nil, nil, wire.InvalidArgument("timeout_ns", "must be >= 0")
	case timeoutNs == 0:
		return ctx, func() {}, nil
	}
	budget := time.Duration(timeoutNs)
	ctx, cancel := context.WithTimeout(ctx, budget-budget/10)
	return ctx, cancel, nil
}

// singleItem validates the hop count and converts the item of an Acquire
// or Release.
func singleItem(hops uint32, it *sluicev1.PeerItem, zones *bucket.Zones) (int, limiter.Forwarded, error) {
	var f limiter.Forwarded
	h, err := peerHops(hops)
	if err != nil {
		return 0, f, err
	}
	if it == nil {
		return 0, f, wire.InvalidArgument("item", "is required")
	}
	if fe := fromPeerItem(&f, it, zones); fe != nil {
		return 0, f, wire.InvalidArgument(peerFieldPath("item", fe.Field), fe.Reason)
	}
	return h, f, nil
}

func (s *peerServer) Acquire(ctx context.Context, req *sluicev1.PeerAcquireRequest) (*sluicev1.PeerAcquireResponse, error) {
	defer s.observe(peerAcquire, time.Now())
	hops, f, err := singleItem(req.GetHops(), req.GetItem(), &s.zones)
	if err != nil {
		return nil, err
	}
	ttl := time.Duration(req.GetTtlNs())
	switch {
	case ttl == 0:
		ttl = limiter.DefaultLeaseTTL
	case ttl < 0:
		return nil, wire.InvalidArgument("ttl_ns", "must be >= 0")
	case ttl > limiter.MaxLeaseTTL:
		return nil, wire.InvalidArgument("ttl_ns", fmt.Sprintf("must be <= %v", limiter.MaxLeaseTTL))
	}
	f.Holder = req.GetHolder()
	ans, id, err := s.svc.AcquireForwarded(limiter.WithSenderEpoch(ctx, req.GetEpoch()), req.GetFrom(), hops, f, ttl)
	if err != nil {
		return nil, peerStatus(err)
	}
	return &sluicev1.PeerAcquireResponse{Owner: s.name, Result: toPeerResult(&sluicev1.PeerResult{}, &ans), LeaseId: id.ID, LeaseTag: id.Tag}, nil
}

func (s *peerServer) Release(ctx context.Context, req *sluicev1.PeerReleaseRequest) (*sluicev1.PeerReleaseResponse, error) {
	defer s.observe(peerRelease, time.Now())
	hops, f, err := singleItem(req.GetHops(), req.GetItem(), &s.zones)
	if err != nil {
		return nil, err
	}
	f.Holder = req.GetHolder()
	ans, ok, err := s.svc.ReleaseForwarded(limiter.WithSenderEpoch(ctx, req.GetEpoch()), req.GetFrom(), hops, f, store.LeaseID{ID: req.GetLeaseId(), Tag: req.GetLeaseTag()})
	if err != nil {
		return nil, peerStatus(err)
	}
	return &sluicev1.PeerReleaseResponse{Owner: s.name, Result: toPeerResult(&sluicev1.PeerResult{}, &ans), Released: ok}, nil
}

func (s *peerServer) Fetch(ctx context.Context, req *sluicev1.FetchRequest) (*sluicev1.FetchResponse, error) {
	defer s.observe(peerFetch, time.Now())
	hashes := req.GetHashes()
	if len(hashes) > maxPeerHashes {
		return nil, wire.InvalidArgument("hashes", fmt.Sprintf("%d hashes, at most %d per call", len(hashes), maxPeerHashes))
	}
	resp := &sluicev1.FetchResponse{}
	if len(hashes) == 0 {
		return resp, nil
	}
	entries, err := s.svc.FetchMoved(limiter.WithSenderEpoch(ctx, req.GetEpoch()), req.GetFrom(), hashes)
	if err != nil {
		return nil, peerStatus(err)
	}
	states := make([]sluicev1.KeyState, len(entries))
	resp.States = make([]*sluicev1.KeyState, len(entries))
	for i := range entries {
		resp.States[i] = toKeyState(&states[i], &entries[i])
	}
	return resp, nil
}

func (s *peerServer) Handoff(ctx context.Context, req *sluicev1.HandoffRequest) (*sluicev1.HandoffResponse, error) {
	defer s.observe(peerHandoff, time.Now())
	states := req.GetStates()
	if len(states) > MaxHandoffStates {
		return nil, wire.InvalidArgument("states", fmt.Sprintf("%d states, at most %d per call", len(states), MaxHandoffStates))
	}
	if n := len(req.GetDonePartitions()); n > maxDonePartitions {
		return nil, wire.InvalidArgument("done_partitions", fmt.Sprintf("%d partitions, at most %d per call", n, maxDonePartitions))
	}
	entries := make([]store.Entry, len(states))
	for i, ks := range states {
		if fe := fromKeyState(&entries[i], ks); fe != nil {
			return nil, wire.InvalidArgument(peerFieldPath(fmt.Sprintf("states[%d]", i), fe.Field), fe.Reason)
		}
	}
	if req.GetReplica() {
		if len(req.GetDonePartitions()) > 0 {
			return nil, wire.InvalidArgument("done_partitions", "must be empty with replica")
		}
		if len(entries) == 0 {
			return &sluicev1.HandoffResponse{}, nil
		}
		refused, err := s.svc.AcceptReplicas(limiter.WithSenderEpoch(ctx, req.GetEpoch()), req.GetFrom(), entries)
		if err != nil {
			return nil, peerStatus(err)
		}
		return &sluicev1.HandoffResponse{Refused: int32(min(refused, len(entries)))}, nil
	}
	var done []int
	if dp := req.GetDonePartitions(); len(dp) > 0 {
		done = make([]int, len(dp))
		for i, p := range dp {
			if p < 0 {
				return nil, wire.InvalidArgument(fmt.Sprintf("done_partitions[%d]", i), "must be >= 0")
			}
			done[i] = int(p)
		}
	}
	if len(entries) == 0 && len(done) == 0 {
		return &sluicev1.HandoffResponse{}, nil
	}
	refused, err := s.svc.AcceptHandoff(limiter.WithSenderEpoch(ctx, req.GetEpoch()), req.GetFrom(), entries, done)
	if errors.Is(err, limiter.ErrNotMember) {
		return nil, peerStatus(err)
	}
	if errors.Is(err, limiter.ErrLeaving) {
		// This node is leaving too: the sender must pick the next owner.
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &sluicev1.HandoffResponse{Refused: int32(min(refused, len(entries)))}, nil
}

// peerStatus is the status of a peer call the service refused: a caller
// that is not a member of this node's ring gets PermissionDenied, one
// refused for its epoch Aborted (epochStatus).
func peerStatus(err error) error {
	if errors.Is(err, limiter.ErrNotMember) {
		return status.Error(codes.PermissionDenied, err.Error())
	}
	if st, ok := epochStatus(err); ok {
		return st.Err()
	}
	return status.Error(codes.Internal, err.Error())
}
