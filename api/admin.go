package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluice-rl/sluice/internal/logcap"
	"github.com/sluice-rl/sluice/internal/wire"
	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// The admin API: sluice.v1.Admin (Inspect, Reset) over gRPC, and
// /v1/admin/inspect and /v1/admin/reset over HTTP (admin_http.go). Every
// call needs an admin identity:
//
//   - a client certificate the TLS handshake verified (mTLS) with a name in
//     AdminConfig.Names (--admin-names): its subject's common name, or one
//     of its DNS, URI or e-mail subject alternative names; or
//   - a bearer token of AdminConfig.Tokens (--admin-token-file), in the
//     gRPC metadata "authorization" or the HTTP header Authorization as
//     "Bearer TOKEN", compared in constant time (SHA-256 of both).
//
// With neither configured every call is refused (PERMISSION_DENIED, HTTP
// 403), naming the two flags. Refusals and resets are logged with the
// caller's identity, marked logcap.Refusal so that the node's capped
// logger lets at most one line a second of each through, and counted.

// AdminService is what the admin API needs from the limiter.
// (*limiter.Limiter satisfies it.)
type AdminService interface {
	Inspect(ctx context.Context, req limiter.Request) (limiter.KeyInfo, error)
	Reset(ctx context.Context, req limiter.Request, remaining int64) (limiter.KeyInfo, error)
}

// AdminConfig configures the admin API.
type AdminConfig struct {
	// Service inspects and resets keys; required.
	Service AdminService
	// Names are the client certificate names that are admins.
	Names []string
	// Tokens returns the admin bearer tokens in force (re-read by the
	// caller when their file changes); nil means none.
	Tokens func() [][]byte
	// Logger receives resets and refusals; nil discards them.
	Logger *slog.Logger
	// Registerer receives sluice_admin_resets_total and
	// sluice_admin_refused_total; nil registers nowhere.
	Registerer prometheus.Registerer
}

// Admin serves the admin API.
type Admin struct {
	svc     AdminService
	names   map[string]bool
	tokens  func() [][]byte
	log     *slog.Logger
	resets  prometheus.Counter
	refused prometheus.Counter
}

// NewAdmin builds the admin API. Names must be non-empty strings.
func NewAdmin(cfg AdminConfig) (*Admin, error) {
	if cfg.Service == nil {
		return nil, fmt.Errorf("%w: AdminConfig.Service: is required", ErrInvalidConfig)
	}
	a := &Admin{svc: cfg.Service, tokens: cfg.Tokens, log: cfg.Logger, names: map[string]bool{},
		resets: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "sluice", Name: "admin_resets_total",
			Help: "Keys reset by admin calls answered by this node (sluice.v1.Admin/Reset, POST /v1/admin/reset)."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "sluice", Name: "admin_refused_total",
			Help: "Admin calls refused for want of an admin identity."}),
	}
	for i, n := range cfg.Names {
		if n == "" {
			return nil, fmt.Errorf("%w: AdminConfig.Names[%d]: must not be empty", ErrInvalidConfig, i)
		}
		a.names[n] = true
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{a.resets, a.refused} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return a, nil
}

// Register registers sluice.v1.Admin on s.
func (a *Admin) Register(s grpc.ServiceRegistrar) {
	sluicev1.RegisterAdminServer(s, &adminServer{a: a})
}

// Refusals of the admin API.
const (
	msgAdminDisabled = "admin calls are disabled on this node: start it with --admin-names (client certificate names) or --admin-token-file (bearer tokens)"
	msgNotAdmin      = "the caller is not an admin: present a client certificate with a name in --admin-names, or a token of --admin-token-file as \"authorization: Bearer TOKEN\""
)

// caller returns the admin identity of a call with TLS state cs (nil for
// none) and authorization value authz, or a refusal's message.
func (a *Admin) caller(cs *tls.ConnectionState, authz string) (string, string) {
	if len(a.names) == 0 && a.tokens == nil {
		return "", msgAdminDisabled
	}
	if cs != nil && len(cs.VerifiedChains) > 0 && len(cs.VerifiedChains[0]) > 0 && len(a.names) > 0 {
		c := cs.VerifiedChains[0][0]
		names := append([]string{c.Subject.CommonName}, c.DNSNames...)
		names = append(names, c.EmailAddresses...)
		for _, u := range c.URIs {
			names = append(names, u.String())
		}
		for _, n := range names {
			if n != "" && a.names[n] {
				return "certificate " + strconv.Quote(n), ""
			}
		}
	}
	if tok, ok := bearer(authz); ok && a.tokens != nil {
		got := sha256.Sum256([]byte(tok))
		for _, t := range a.tokens() {
			want := sha256.Sum256(t)
			if subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
				return "token sha256:" + hex.EncodeToString(want[:4]), ""
			}
		}
	}
	return "", msgNotAdmin
}

// bearer returns the token of an "authorization: Bearer TOKEN" value.
func bearer(v string) (string, bool) {
	const p = "bearer "
	if len(v) <= len(p) || !strings.EqualFold(v[:len(p)], p) {
		return "", false
	}
	t := strings.TrimSpace(v[len(p):])
	return t, t != ""
}

// refuse logs and counts a refused call.
func (a *Admin) refuse(method, remote, why string) {
	a.refused.Inc()
	a.log.Warn("admin call refused", "method", method, "remote", remote, "reason", why, logcap.Refusal, true)
}

// logReset logs and counts a reset.
func (a *Admin) logReset(caller string, req *limiter.Request, remaining int64, info *limiter.KeyInfo) {
	a.resets.Inc()
	to := "full"
	if remaining != limiter.ResetFull {
		to = strconv.FormatInt(remaining, 10)
	}
	a.log.Warn("admin reset", "caller", caller, "key", req.Key, "policy", req.Policy,
		"to", to, "owner", info.Owner, logcap.Refusal, true)
}

// adminServer implements sluicev1.AdminServer.
type adminServer struct {
	sluicev1.UnimplementedAdminServer
	a *Admin
}

// grpcCaller is the admin identity of a gRPC call, or PermissionDenied.
func (s *adminServer) grpcCaller(ctx context.Context, method string) (string, error) {
	var cs *tls.ConnectionState
	remote := ""
	if p, ok := peer.FromContext(ctx); ok {
		if p.Addr != nil {
			remote = p.Addr.String()
		}
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			cs = &info.State
		}
	}
	var authz string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("authorization"); len(v) > 0 {
			authz = v[0]
		}
	}
	caller, why := s.a.caller(cs, authz)
	if why != "" {
		s.a.refuse(method, remote, why)
		return "", status.Error(codes.PermissionDenied, why)
	}
	return caller, nil
}

func (s *adminServer) Inspect(ctx context.Context, req *sluicev1.InspectRequest) (*sluicev1.InspectResponse, error) {
	if _, err := s.grpcCaller(ctx, "Inspect"); err != nil {
		return nil, err
	}
	var r limiter.Request
	if fe := fromProtoItem(&r, req.GetKey(), req.GetLimit(), req.GetPolicy(), nil); fe != nil {
		return nil, wire.InvalidArgument(fe.Field, fe.Reason)
	}
	info, err := s.a.svc.Inspect(ctx, r)
	if err != nil {
		return nil, adminGRPCError(err)
	}
	return &sluicev1.InspectResponse{Key: toProtoKeyInfo(&info)}, nil
}

func (s *adminServer) Reset(ctx context.Context, req *sluicev1.ResetRequest) (*sluicev1.ResetResponse, error) {
	caller, err := s.grpcCaller(ctx, "Reset")
	if err != nil {
		return nil, err
	}
	var r limiter.Request
	if fe := fromProtoItem(&r, req.GetKey(), req.GetLimit(), req.GetPolicy(), nil); fe != nil {
		return nil, wire.InvalidArgument(fe.Field, fe.Reason)
	}
	remaining := int64(limiter.ResetFull)
	if req.Remaining != nil {
		if remaining = req.GetRemaining(); remaining < 0 {
			return nil, wire.InvalidArgument("remaining", fmt.Sprintf("%d: must be >= 0 (omit it for full)", remaining))
		}
	}
	info, err := s.a.svc.Reset(ctx, r, remaining)
	if err != nil {
		return nil, adminGRPCError(err)
	}
	s.a.logReset(caller, &r, remaining, &info)
	return &sluicev1.ResetResponse{Key: toProtoKeyInfo(&info)}, nil
}

// adminGRPCError maps an Inspect or Reset error to a status: an
// unreachable owner is Unavailable, the rest as for the other calls.
func adminGRPCError(err error) error {
	if errors.Is(err, limiter.ErrPeerUnavailable) {
		return status.Error(codes.Unavailable, err.Error())
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown && st.Code() != codes.OK {
		return st.Err() // an owner's answer (e.g. UNIMPLEMENTED from an older node)
	}
	return grpcError("", err)
}

// toProtoKeyInfo converts a KeyInfo for the public API.
func toProtoKeyInfo(k *limiter.KeyInfo) *sluicev1.KeyInfo {
	out := &sluicev1.KeyInfo{
		Owner:            k.Owner,
		Algorithm:        wire.ToProtoAlgorithm(k.Algorithm),
		Policy:           k.Policy,
		Limit:            k.Limit,
		Remaining:        k.Remaining,
		ResetAfter:       durationpb.New(k.ResetAfter),
		Exists:           k.Exists,
		Grants:           int32(min(k.Grants, 1<<31-1)),
		GrantedTokens:    k.GrantedTokens,
		LeaseCount:       int32(min(k.LeaseCount, 1<<31-1)),
		ReservationCount: int32(min(k.Reservations, 1<<31-1)),
		ReservedUnits:    k.ReservedUnits,
		DebtUnits:        k.DebtUnits,
	}
	if k.Now != 0 {
		out.ResetAt = timestamppb.New(keyTime(k.Now).Add(k.ResetAfter))
	}
	if k.WindowStart != 0 {
		out.WindowStart = timestamppb.New(keyTime(k.WindowStart))
	}
	for _, le := range k.Leases {
		out.Leases = append(out.Leases, &sluicev1.LeaseInfo{Cost: le.Cost, ExpiresAfter: durationpb.New(le.ExpiresAfter), Bound: le.Bound})
	}
	return out
}
