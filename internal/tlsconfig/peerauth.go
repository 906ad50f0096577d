package tlsconfig

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// DefaultPeerName is the DNS name every peer certificate carries.
const DefaultPeerName = "sluice-peer"

// PeerAuth admits a gRPC caller to a service only if it is a peer. The
// rule: the caller presented a client certificate over TLS, the handshake
// verified it, the verified chain ends at a certificate of the peer CA
// bundle (Source's CA), and the leaf carries Name among its DNS SANs. A
// client certificate of another CA (the public one, say) is refused even
// when the listener accepted it, so the rule holds whatever port the
// service shares. Refusals are PermissionDenied, and logged (at most once
// a second, with a count of those not logged).
type PeerAuth struct {
	// Source holds the peer CA bundle (its CA file). Required.
	Source *Source
	// Name is the DNS SAN required of a peer's certificate; empty means
	// DefaultPeerName.
	Name string
	// Service is the full gRPC service name the interceptors guard
	// ("sluice.v1.Peer"); empty guards every method of the server.
	Service string
	// Logger receives the refusals; nil discards them.
	Logger *slog.Logger

	mu         sync.Mutex
	lastLog    time.Time
	suppressed int
}

// Authorize returns nil if the caller of ctx is a peer, else a
// PermissionDenied status saying why.
func (a *PeerAuth) Authorize(ctx context.Context) error {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return status.Error(codes.PermissionDenied, "peer service: no caller information")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return a.deny(p, "not over TLS")
	}
	chains := info.State.VerifiedChains
	if len(chains) == 0 || len(chains[0]) == 0 {
		return a.deny(p, "no verified client certificate")
	}
	leaf := chains[0][0]
	if !slices.Contains(leaf.DNSNames, a.name()) {
		return a.deny(p, fmt.Sprintf("certificate %q has no DNS SAN %q", leaf.Subject.String(), a.name()))
	}
	cas := a.Source.Current().CAs
	for _, chain := range chains {
		root := chain[len(chain)-1]
		if slices.ContainsFunc(cas, func(ca *x509.Certificate) bool { return bytes.Equal(ca.Raw, root.Raw) }) {
			return nil
		}
	}
	return a.deny(p, fmt.Sprintf("certificate %q is not issued by the peer CA", leaf.Subject.String()))
}

func (a *PeerAuth) name() string {
	if a.Name == "" {
		return DefaultPeerName
	}
	return a.Name
}

// deny logs a refusal (rate-limited) and returns its status.
func (a *PeerAuth) deny(p *peer.Peer, why string) error {
	if a.Logger != nil {
		a.mu.Lock()
		now := time.Now()
		if now.Sub(a.lastLog) >= time.Second {
			a.Logger.Warn("peer service: caller refused: not a peer", "remote", p.Addr.String(), "reason", why,
				"refusals_not_logged", a.suppressed)
			a.lastLog, a.suppressed = now, 0
		} else {
			a.suppressed++
		}
		a.mu.Unlock()
	}
	return status.Error(codes.PermissionDenied, "peer service: caller is not a peer: "+why)
}

// guards reports whether the interceptors apply to the method.
func (a *PeerAuth) guards(fullMethod string) bool {
	return a.Service == "" || strings.HasPrefix(fullMethod, "/"+a.Service+"/")
}

// Unary is the unary server interceptor.
func (a *PeerAuth) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if a.guards(info.FullMethod) {
			if err := a.Authorize(ctx); err != nil {
				return nil, err
			}
		}
		return handler(ctx, req)
	}
}

// Stream is the stream server interceptor.
func (a *PeerAuth) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if a.guards(info.FullMethod) {
			if err := a.Authorize(ss.Context()); err != nil {
				return err
			}
		}
		return handler(srv, ss)
	}
}
