package middleware

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-rl/sluice/client"
)

// GRPCKeyFunc extracts a call's key for a rule from its context (incoming
// metadata, peer) and full method name ("/pkg.Service/Method"); ok false
// means the rule does not apply to the call.
type GRPCKeyFunc func(ctx context.Context, fullMethod string) (key string, ok bool)

// GRPCRule is one limit the gRPC interceptors check for each call: Cost
// units of the key Key extracts, under Policy or Limit.
type GRPCRule struct {
	// Name names the rule: the checked key is Name + ":" + the extracted
	// key, so that rules do not share buckets. Empty means Policy.
	Name string
	// Key extracts the call's key; required.
	Key GRPCKeyFunc
	// Policy names a policy configured on the nodes; when empty, Limit
	// applies (its Limit and Period must be > 0).
	Policy string
	Limit  client.Limit
	// Cost is the units a call spends; 0 means 1.
	Cost int64
	// Estimate, when > 0, makes the rule a reservation, as
	// HTTPRule.Estimate: the handler reports the actual cost with
	// ReportCost(ctx, n) on its context, settled when it returns.
	Estimate int64
}

// GRPCConfig configures NewGRPC.
type GRPCConfig struct {
	// Client is the Sluice client the checks go through; required.
	Client *client.Client
	// Rules are checked together, in one call, for each RPC; at least
	// one. An RPC is denied when any applicable rule denies it; then
	// no rule spends its cost (all or nothing, client.CheckAtomic) unless
	// ChargeEveryRule is set.
	Rules []GRPCRule
	// ChargeEveryRule, when true, has every applicable rule spend its cost
	// even when another denies (one plain Check, which may be answered from
	// the client's local grants). False, the default: the rules of a
	// RPC with more than one applicable rule are checked all or nothing
	// (client.CheckAtomic, never from grants; across owners only token
	// buckets, fixed and sliding windows, see docs/api.md).
	ChargeEveryRule bool
	// FailMode is what happens to calls Sluice cannot decide; required
	// (FailOpen or FailClosed).
	FailMode FailMode
	// OnError, if set, is called with why Sluice could not decide a call,
	// whatever FailMode did with it. When nil, each such call is logged to
	// Logger, at most one line a second per reason (the error's code and
	// rule) with a count of those not logged: at ERROR for a rule Sluice
	// rejected (ErrRuleRejected), else at WARN.
	OnError func(ctx context.Context, fullMethod string, err error)
	// Logger is where the default OnError logs; nil means slog.Default().
	Logger *slog.Logger
}

// GRPC holds gRPC server interceptors that check each call against a set
// of rules. Build it with NewGRPC.
type GRPC struct {
	l       *limiter
	keys    []GRPCKeyFunc
	onError func(ctx context.Context, fullMethod string, err error)
	errLog  *errorLog // the default onError
}

// NewGRPC returns the gRPC interceptors of cfg: Unary for unary calls,
// Stream for streams, which are checked once, when they open.
//
// An allowed call goes on to its handler. A denied one fails with status
// ResourceExhausted, whose details are an errdetails.RetryInfo (the delay
// after which the most restrictive denied rule could allow it) and an
// errdetails.QuotaFailure naming each denied rule's key. When no rule
// applies, the call goes on. A key over Sluice's 1024 bytes fails the call
// with InvalidArgument. When Sluice cannot decide, FailOpen lets the call
// through and FailClosed fails it with Unavailable, except for a rule
// Sluice rejects (an unknown policy: ErrRuleRejected), whose calls fail
// with Internal in either mode. Each such call is reported to OnError, or
// logged (see OnError).
//
// It fails, with an error wrapping ErrConfig, on a nil Client, no rules,
// a rule without Key, Name or a valid Limit, or no FailMode.
func NewGRPC(cfg GRPCConfig) (*GRPC, error) {
	l, err := newLimiter(cfg.Client, cfg.FailMode, len(cfg.Rules))
	if err == nil {
		l.atomic = !cfg.ChargeEveryRule
	}
	if err != nil {
		return nil, err
	}
	g := &GRPC{l: l, keys: make([]GRPCKeyFunc, len(cfg.Rules)), onError: cfg.OnError, errLog: newErrorLog(cfg.Logger)}
	for i, gr := range cfg.Rules {
		r, err := newRule(i, gr.Name, gr.Policy, gr.Limit, gr.Cost, gr.Key != nil)
		if err == nil && gr.Estimate < 0 {
			err = fmt.Errorf("%w: Rules[%d].Estimate: must not be negative", ErrConfig, i)
		}
		if err != nil {
			return nil, err
		}
		r.estimate = gr.Estimate
		l.rules = append(l.rules, r)
		g.keys[i] = gr.Key
	}
	return g, nil
}

// Unary is the unary server interceptor (grpc.ChainUnaryInterceptor).
func (g *GRPC) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resv, err := g.check(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		if resv == nil {
			return handler(ctx, req)
		}
		rep := new(costReport)
		defer g.settle(ctx, info.FullMethod, resv, rep)
		return handler(context.WithValue(ctx, costKey{}, rep), req)
	}
}

// Stream is the stream server interceptor (grpc.ChainStreamInterceptor).
func (g *GRPC) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		resv, err := g.check(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		if resv == nil {
			return handler(srv, ss)
		}
		rep := new(costReport)
		defer g.settle(ss.Context(), info.FullMethod, resv, rep)
		return handler(srv, reportingStream{ss, context.WithValue(ss.Context(), costKey{}, rep)})
	}
}

// reportingStream is a stream whose context carries a costReport.
type reportingStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s reportingStream) Context() context.Context { return s.ctx }

// settle settles a call's reservation with the cost its handler
// reported, reporting a failure as a decision's error is.
func (g *GRPC) settle(ctx context.Context, method string, resv *client.Reservation, rep *costReport) {
	err := g.l.settle(ctx, resv, rep)
	switch {
	case err == nil:
	case g.onError != nil:
		g.onError(ctx, method, err)
	default:
		g.errLog.report(ctx, method, &decision{err: err, reason: "settle"})
	}
}

// check decides a call; a nil error lets it through, with the call's
// reservation to settle after it (nil for none).
func (g *GRPC) check(ctx context.Context, method string) (*client.Reservation, error) {
	ks, ok := make([]string, len(g.keys)), make([]bool, len(g.keys))
	for i, f := range g.keys {
		ks[i], ok[i] = f(ctx, method)
	}
	d := g.l.decide(ctx, ks, ok)
	if d.badKey != nil {
		return nil, status.Error(codes.InvalidArgument, d.badKey.Error())
	}
	switch {
	case d.err == nil:
	case g.onError != nil:
		g.onError(ctx, method, d.err)
	default:
		g.errLog.report(ctx, method, &d)
	}
	switch {
	case d.rejected:
		return nil, status.Error(codes.Internal, "rate limiter misconfigured")
	case len(d.denied) > 0:
		st := status.New(codes.ResourceExhausted, "rate limit exceeded")
		qf := &errdetails.QuotaFailure{}
		for _, it := range d.denied {
			qf.Violations = append(qf.Violations, &errdetails.QuotaFailure_Violation{
				Subject: it.key, Description: fmt.Sprintf("rate limit %q exceeded", it.rule)})
		}
		ri := &errdetails.RetryInfo{RetryDelay: durationpb.New(d.header.RetryAfter)}
		if withDetails, err := st.WithDetails(ri, qf); err == nil {
			st = withDetails
		}
		return nil, st.Err()
	case !d.allow:
		return nil, status.Error(codes.Unavailable, "rate limiter unavailable")
	}
	return d.resv, nil
}

// Metadata returns a key function whose key is the call's incoming
// metadata value for name (its first; names are lower case); the rule
// does not apply when it is absent or empty.
func Metadata(name string) GRPCKeyFunc {
	name = strings.ToLower(name)
	return func(ctx context.Context, _ string) (string, bool) {
		v := metadata.ValueFromIncomingContext(ctx, name)
		if len(v) == 0 || v[0] == "" {
			return "", false
		}
		return v[0], true
	}
}

// PeerIP returns a key function whose key is the IP address of the call's
// immediate peer, in canonical form without port or zone (IPv4 in IPv6 as
// IPv4); a peer that is not an IP address (a Unix socket) is its address
// as it is. The rule does not apply when the context has no peer.
func PeerIP() GRPCKeyFunc {
	return func(ctx context.Context, _ string) (string, bool) {
		p, ok := peer.FromContext(ctx)
		if !ok || p.Addr == nil {
			return "", false
		}
		if tcp, ok := p.Addr.(*net.TCPAddr); ok {
			if a, ok := netip.AddrFromSlice(tcp.IP); ok {
				return a.Unmap().String(), true
			}
		}
		if a, ok := parseHostPort(p.Addr.String()); ok {
			return a.String(), true
		}
		s := p.Addr.String()
		return s, s != ""
	}
}

// FullMethod returns a key function whose key is the call's full method
// name, "/pkg.Service/Method": a limit per method.
func FullMethod() GRPCKeyFunc {
	return func(_ context.Context, method string) (string, bool) { return method, method != "" }
}

// JoinGRPC returns a key function whose key is the keys of fs joined by
// sep, e.g. a method and a peer for a limit per peer per method. The rule
// applies only when every one of fs does.
func JoinGRPC(sep string, fs ...GRPCKeyFunc) GRPCKeyFunc {
	return func(ctx context.Context, method string) (string, bool) {
		var b strings.Builder
		for i, f := range fs {
			k, ok := f(ctx, method)
			if !ok {
				return "", false
			}
			if i > 0 {
				b.WriteString(sep)
			}
			b.WriteString(k)
		}
		return b.String(), len(fs) > 0
	}
}
