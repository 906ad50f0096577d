package api

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/internal/wire"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/policy"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// Service is what the gRPC API needs from the limiter. (*limiter.Limiter
// satisfies it.) Implementations must be safe for concurrent use, and Check
// must not keep reqs or out, nor write to them, after it returns: the gRPC
// server reuses them for later calls.
type Service interface {
	Checker
	Acquire(ctx context.Context, req limiter.AcquireRequest) (limiter.Lease, error)
	Release(ctx context.Context, req limiter.ReleaseRequest) (bool, limiter.Result, error)
	Grant(ctx context.Context, req limiter.Request, want int64) (limiter.Granted, limiter.Result, error)
	ReturnGrant(ctx context.Context, req limiter.Request, g limiter.Granted) (int64, error)
	GrantTTL() time.Duration
}

// ErrInvalidConfig wraps every configuration error of the package.
var ErrInvalidConfig = errors.New("api: invalid config")

// GRPCConfig configures the gRPC API.
type GRPCConfig struct {
	// Service decides checks and leases.
	Service Service
	// Metrics records call latency; nil records nothing.
	Metrics *Metrics
	// ServerOptions are passed to grpc.NewServer (e.g. credentials later).
	ServerOptions []grpc.ServerOption
	// Recovery turns a handler's panic into INTERNAL, a log line and a
	// count (its ServerOptions are installed on the server, and
	// CheckStream's goroutines recover with it); nil logs to
	// slog.Default() and counts nothing.
	Recovery *wire.Recovery
	// Limits, if not nil, admit CheckStream's messages (the in-flight
	// budgets of their connection and of the listener, memory shedding)
	// and run them on the listener's pool; the server's options that
	// enforce the rest (Limits.ServerOptions) come in ServerOptions.
	Limits *wire.Limits
}

// GRPC is the gRPC server with sluice.v1, grpc.health.v1 and reflection.
type GRPC struct {
	// Server is the underlying server; register more services on it before serving.
	Server *grpc.Server
	// Health is the health service; the node flips it to NOT_SERVING on shutdown.
	Health *health.Server

	drain    context.CancelFunc
	drainCtx context.Context
}

// DrainStreams asks every client with an open CheckStream, and every
// client that opens one later, to close it (see CheckStreamResponse.drain).
// Call it before Server.GracefulStop, which waits for streams to end.
func (g *GRPC) DrainStreams() { g.drain() }

// NewGRPC builds the gRPC server.
func NewGRPC(cfg GRPCConfig) (*GRPC, error) {
	if cfg.Service == nil {
		return nil, fmt.Errorf("%w: GRPCConfig.Service: is required", ErrInvalidConfig)
	}
	m := cfg.Metrics
	if m == nil {
		var err error
		if m, err = NewMetrics(nil); err != nil {
			return nil, err
		}
	}
	// Sluice's server options first (wire.ServerOptions: the vtprotobuf
	// codec, fixed flow-control windows, stream workers; then the panic
	// recovery), so that cfg.ServerOptions can override them.
	opts := append(wire.ServerOptions(), cfg.Recovery.ServerOptions()...)
	opts = append(opts, cfg.ServerOptions...)
	srv := grpc.NewServer(opts...)
	drainCtx, drain := context.WithCancel(context.Background())
	api := &rateLimiterServer{svc: cfg.Service, drain: drainCtx, recovery: cfg.Recovery, limits: cfg.Limits,
		obsCheck:   m.observer("grpc", "Check"),
		obsAcquire: m.observer("grpc", "Acquire"),
		obsRelease: m.observer("grpc", "Release"),
		obsStream:  m.observer("grpc", "CheckStream"),
	}
	sluicev1.RegisterRateLimiterServer(srv, api)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(sluicev1.RateLimiter_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	return &GRPC{Server: srv, Health: hs, drain: drain, drainCtx: drainCtx}, nil
}

// checkScratch is Check's per-call scratch, pooled per server.
type checkScratch struct {
	reqs []limiter.Request
	res  []limiter.Result
	idx  []int // CheckStream: the message item of each request
}

// get returns n zero requests, with room for n results in sc.res.
func (sc *checkScratch) get(n int) []limiter.Request {
	if cap(sc.reqs) < n {
		sc.reqs = make([]limiter.Request, n)
		sc.res = make([]limiter.Result, 0, n)
		sc.idx = make([]int, 0, n)
	}
	return sc.reqs[:n]
}

// rateLimiterServer implements sluicev1.RateLimiterServer over a Service.
type rateLimiterServer struct {
	sluicev1.UnimplementedRateLimiterServer
	scratch                          sync.Pool // of *checkScratch
	answers                          sync.Pool // of *streamAnswer (CheckStream)
	requests                         sync.Pool // of *streamRequest (CheckStream)
	svc                              Service
	limits                           *wire.Limits // nil: none
	obsCheck, obsAcquire, obsRelease interface{ Observe(float64) }
	obsStream                        interface{ Observe(float64) }
	// drain ends when the server asks CheckStream clients to go away.
	drain    context.Context
	recovery *wire.Recovery
}

func (s *rateLimiterServer) Check(ctx context.Context, req *sluicev1.CheckRequest) (*sluicev1.CheckResponse, error) {
	start := time.Now()
	defer func() { s.obsCheck.Observe(time.Since(start).Seconds()) }()
	items := req.GetItems()
	if len(items) > limiter.MaxItems {
		return nil, wire.InvalidArgument("items", fmt.Sprintf("%d items, at most %d per call", len(items), limiter.MaxItems))
	}
	// reqs and the limiter's results are scratch: the Service keeps
	// neither after Check returns (see Service), so they are pooled.
	sc, _ := s.scratch.Get().(*checkScratch)
	if sc == nil {
		sc = new(checkScratch)
	}
	defer func() {
		clear(sc.reqs[:cap(sc.reqs)]) // pin no keys or errors in the pool
		clear(sc.res[:cap(sc.res)])
		s.scratch.Put(sc)
	}()
	reqs := sc.get(len(items))
	client := grpcHolder(ctx) // new keys count against its cap
	for i, it := range items {
		if err := fromProtoItem(&reqs[i], it.GetKey(), it.GetLimit(), it.GetPolicy(), it.Cost); err != nil {
			return nil, wire.InvalidArgument(fmt.Sprintf("items[%d].%s", i, err.Field), err.Reason)
		}
		reqs[i].UpTo, reqs[i].Client = it.GetUpTo(), client
	}
	var results []limiter.Result
	var err error
	if req.GetAtomic() {
		results, err = checkAtomic(ctx, s.svc, reqs)
		if errors.Is(err, limiter.ErrAtomicElsewhere) || errors.Is(err, errNoAtomic) {
			return nil, status.Error(codes.FailedPrecondition, err.Error())
		}
		if errors.Is(err, limiter.ErrPeerUnavailable) {
			// Not UNAVAILABLE, which clients retry (the Go client's
			// service config): the owner may have applied the batch.
			return nil, status.Error(codes.Aborted, err.Error())
		}
	} else {
		results, err = s.svc.Check(ctx, reqs, sc.res[:0])
	}
	if err != nil {
		return nil, grpcError("items", err)
	}
	// One allocation each for the results and their durations.
	out := make([]sluicev1.CheckResult, len(results))
	durs := make([]durationpb.Duration, 2*len(results))
	resp := &sluicev1.CheckResponse{Results: make([]*sluicev1.CheckResult, len(results))}
	for i := range results {
		o := &out[i]
		fillResult(o, durs[2*i:], &results[i])
		resp.Results[i] = o
	}
	return resp, nil
}

func (s *rateLimiterServer) Acquire(ctx context.Context, req *sluicev1.AcquireRequest) (*sluicev1.AcquireResponse, error) {
	start := time.Now()
	defer func() { s.obsAcquire.Observe(time.Since(start).Seconds()) }()
	var ar limiter.AcquireRequest
	if err := fromProtoItem(&ar.Request, req.GetKey(), req.GetLimit(), req.GetPolicy(), req.Cost); err != nil {
		return nil, wire.InvalidArgument(err.Field, err.Reason)
	}
	if req.GetLimit() != nil && req.GetLimit().GetAlgorithm() == sluicev1.Algorithm_ALGORITHM_UNSPECIFIED {
		ar.Limit.Algorithm = bucket.Concurrency
	}
	if req.Ttl != nil {
		if err := req.Ttl.CheckValid(); err != nil {
			return nil, wire.InvalidArgument("ttl", err.Error())
		}
		ar.TTL = req.Ttl.AsDuration()
	}
	ar.Holder = grpcHolder(ctx)
	lease, err := s.svc.Acquire(ctx, ar)
	if err != nil {
		return nil, grpcError("", err)
	}
	if lease.Err != nil {
		return nil, status.Error(itemCode(lease.Err), lease.Err.Error())
	}
	return &sluicev1.AcquireResponse{
		Allowed:      lease.Allowed,
		LeaseId:      lease.ID,
		Limit:        lease.Limit,
		Remaining:    lease.Remaining,
		ExpiresAfter: durationpb.New(lease.ExpiresAfter),
		RetryAfter:   durationpb.New(lease.RetryAfter),
		Source:       toProtoSource(lease.Source),
		Owner:        lease.Owner,
	}, nil
}

func (s *rateLimiterServer) Release(ctx context.Context, req *sluicev1.ReleaseRequest) (*sluicev1.ReleaseResponse, error) {
	start := time.Now()
	defer func() { s.obsRelease.Observe(time.Since(start).Seconds()) }()
	var rr limiter.ReleaseRequest
	if err := fromProtoItem(&rr.Request, req.GetKey(), req.GetLimit(), req.GetPolicy(), nil); err != nil {
		return nil, wire.InvalidArgument(err.Field, err.Reason)
	}
	if req.GetLimit() != nil && req.GetLimit().GetAlgorithm() == sluicev1.Algorithm_ALGORITHM_UNSPECIFIED {
		rr.Limit.Algorithm = bucket.Concurrency
	}
	rr.LeaseID = req.GetLeaseId()
	rr.Holder = grpcHolder(ctx)
	ok, res, err := s.svc.Release(ctx, rr)
	if err != nil {
		return nil, grpcError("", err)
	}
	if res.Err != nil {
		return nil, status.Error(itemCode(res.Err), res.Err.Error())
	}
	return &sluicev1.ReleaseResponse{Released: ok, Remaining: res.Remaining}, nil
}

func (s *rateLimiterServer) Grant(ctx context.Context, req *sluicev1.GrantRequest) (*sluicev1.GrantResponse, error) {
	var r limiter.Request
	if err := fromProtoItem(&r, req.GetKey(), req.GetLimit(), req.GetPolicy(), nil); err != nil {
		return nil, wire.InvalidArgument(err.Field, err.Reason)
	}
	if id := req.GetReturnGrant(); id != 0 || req.GetIssuer() != "" {
		n, err := s.svc.ReturnGrant(ctx, r, limiter.Granted{Tokens: req.GetWant(), ID: id, Issuer: req.GetIssuer()})
		switch {
		case err != nil && errors.Is(err, limiter.ErrPeerUnavailable):
			return nil, status.Error(codes.Unavailable, err.Error())
		case err != nil:
			return nil, grpcError("", err)
		}
		return &sluicev1.GrantResponse{Returned: n}, nil
	}
	r.Client = grpcHolder(ctx)
	granted, res, err := s.svc.Grant(ctx, r, req.GetWant())
	switch {
	case err != nil && errors.Is(err, limiter.ErrPeerUnavailable):
		return nil, status.Error(codes.Unavailable, err.Error())
	case err != nil:
		return nil, grpcError("", err)
	}
	return &sluicev1.GrantResponse{
		Granted:    granted.Tokens,
		GrantId:    granted.ID,
		Issuer:     granted.Issuer,
		Limit:      res.Limit,
		Remaining:  res.Remaining,
		ResetAfter: durationpb.New(res.ResetAfter),
		RetryAfter: durationpb.New(res.RetryAfter),
		Ttl:        durationpb.New(s.svc.GrantTTL()),
		Owner:      res.Owner,
	}, nil
}

// fromProtoItem converts the common fields of a check, acquire or release.
// A nil cost means 1.
func fromProtoItem(dst *limiter.Request, key string, l *sluicev1.Limit, pol string, cost *int64) *wire.FieldError {
	dst.Key = key
	dst.Policy = pol
	dst.Cost = 1
	if cost != nil {
		dst.Cost = *cost
	}
	if pol != "" || l == nil {
		if pol == "" {
			return &wire.FieldError{Field: "limit", Reason: "one of limit or policy is required"}
		}
		return nil
	}
	if alg := l.GetAlgorithm(); alg == sluicev1.Algorithm_ALGORITHM_UNSPECIFIED {
		dst.Limit.Algorithm = bucket.TokenBucket
	} else if a, ok := wire.FromProtoAlgorithm(alg); ok {
		dst.Limit.Algorithm = a
	} else {
		return &wire.FieldError{Field: "limit.algorithm", Reason: fmt.Sprintf("unknown algorithm %d", alg)}
	}
	switch l.GetFailureMode() {
	case sluicev1.FailureMode_FAILURE_MODE_UNSPECIFIED, sluicev1.FailureMode_FAILURE_MODE_LOCAL:
		dst.FailureMode = policy.FailLocal
	case sluicev1.FailureMode_FAILURE_MODE_DENY:
		dst.FailureMode = policy.FailDeny
	case sluicev1.FailureMode_FAILURE_MODE_ALLOW:
		dst.FailureMode = policy.FailAllow
	default:
		return &wire.FieldError{Field: "limit.failure_mode", Reason: fmt.Sprintf("unknown failure mode %d", l.GetFailureMode())}
	}
	dst.Limit.Limit = l.GetLimit()
	dst.Limit.Burst = l.GetBurst()
	if p := l.GetPeriod(); p != nil {
		if err := p.CheckValid(); err != nil {
			return &wire.FieldError{Field: "limit.period", Reason: err.Error()}
		}
		dst.Limit.Period = p.AsDuration()
	}
	if c := l.GetCalendar(); c != sluicev1.Calendar_CALENDAR_UNSPECIFIED {
		cal, ok := wire.FromProtoCalendar(c)
		if !ok {
			return &wire.FieldError{Field: "limit.calendar", Reason: fmt.Sprintf("unknown calendar %d", c)}
		}
		dst.Limit.Calendar = cal
	}
	dst.Timezone = l.GetTimezone() // the limiter loads it, or names the field
	return nil
}

// protoFields maps limiter field names to their paths in the proto messages.
var protoFields = map[string]string{
	"limit":     "limit.limit",
	"period":    "limit.period",
	"burst":     "limit.burst",
	"algorithm": "limit.algorithm",
	"calendar":  "limit.calendar",
	"timezone":  "limit.timezone",
}

// grpcError maps a limiter error to a gRPC status. Validation errors become
// InvalidArgument with a BadRequest detail naming the field; prefix is the
// repeated field holding items ("items" for Check, "" for single calls).
func grpcError(prefix string, err error) error {
	var fe *limiter.FieldError
	if errors.As(err, &fe) {
		field := fe.Field
		if p, ok := protoFields[field]; ok {
			field = p
		}
		if prefix != "" {
			if fe.Index >= 0 {
				field = fmt.Sprintf("%s[%d].%s", prefix, fe.Index, field)
			} else if field == "items" {
				field = prefix
			}
		}
		return wire.InvalidArgument(field, fe.Reason)
	}
	if errors.Is(err, context.Canceled) {
		return status.Error(codes.Canceled, err.Error())
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(itemCode(err), err.Error())
}

// setDuration fills a preallocated Duration.
func setDuration(dst *durationpb.Duration, d time.Duration) *durationpb.Duration {
	dst.Seconds = int64(d / time.Second)
	dst.Nanos = int32(d % time.Second)
	return dst
}

// toProtoSource maps a limiter source to the wire enum.
func toProtoSource(s limiter.Source) sluicev1.Source {
	switch s {
	case limiter.SourceOwner:
		return sluicev1.Source_SOURCE_OWNER
	case limiter.SourceGrant:
		return sluicev1.Source_SOURCE_GRANT
	case limiter.SourceFallback:
		return sluicev1.Source_SOURCE_FALLBACK
	}
	return sluicev1.Source_SOURCE_UNSPECIFIED
}

// itemCode is the gRPC code of an item's error: Unavailable when its owner
// could not decide it (unreachable, refusing, or not deciding yet: a retry
// may succeed), else wire.ItemCode's.
func itemCode(err error) codes.Code {
	if errors.Is(err, limiter.ErrPeerUnavailable) {
		return codes.Unavailable
	}
	return wire.ItemCode(err)
}
