package transport

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/internal/wire"
)

// PeerProtocol is the version of the node-to-node protocol this build
// speaks: sluice.v1.Peer's messages and their meaning, and the gossip
// metadata. It is carried on every peer call (ProtocolHeader) and in the
// node's gossip metadata, and changes when a node of this build could not
// work beside one of the previous build's protocol as before (a field it
// needs, a meaning changed). Nodes whose versions differ by at most one
// run side by side (docs/compatibility.md); 0 is a node from before
// versions were carried.
const PeerProtocol = 2

// ProtocolHeader is the gRPC metadata key carrying the caller's
// PeerProtocol on every sluice.v1.Peer call. A call without it comes from
// a node of protocol 0.
const ProtocolHeader = "sluice-peer-protocol"

// ErrIncompatibleProtocol is wrapped by the error of a peer call refused
// because the two nodes' peer protocol versions are too far apart.
var ErrIncompatibleProtocol = errors.New("transport: incompatible peer protocol")

// ProtocolCompatible reports whether nodes of peer protocol versions a and
// b may run side by side: equal, or one apart (N and N-1 during a rolling
// upgrade).
func ProtocolCompatible(a, b int) bool {
	return a >= 0 && b >= 0 && a-b <= 1 && b-a <= 1
}

// checkProtocol returns nil when the caller's protocol (from the call's
// metadata) is compatible with local; InvalidArgument with a BadRequest
// detail when the header is not one non-negative integer; Unimplemented
// naming both versions (wrapping ErrIncompatibleProtocol in its message)
// when they are too far apart.
func checkProtocol(ctx context.Context, local int) error {
	remote := 0
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		switch vals := md.Get(ProtocolHeader); len(vals) {
		case 0:
		case 1:
			v, err := strconv.ParseUint(vals[0], 10, 31)
			if err != nil {
				return wire.InvalidArgument("metadata "+ProtocolHeader, fmt.Sprintf("must be a non-negative integer, got %.32q", vals[0]))
			}
			remote = int(v)
		default:
			return wire.InvalidArgument("metadata "+ProtocolHeader, fmt.Sprintf("must be given once, got %d values", len(vals)))
		}
	}
	if ProtocolCompatible(local, remote) {
		return nil
	}
	return status.Error(codes.Unimplemented, fmt.Errorf("%w: the calling node speaks peer protocol %d, this node %d; "+
		"nodes run side by side only when their versions differ by at most one (docs/compatibility.md)",
		ErrIncompatibleProtocol, remote, local).Error())
}

// ProtocolServerOptions are the interceptors that refuse a sluice.v1.Peer
// call from a node whose peer protocol is incompatible with PeerProtocol.
// Give them to the peer service's gRPC server (after any authentication).
func ProtocolServerOptions() []grpc.ServerOption { return protocolServerOptions(PeerProtocol) }

// protocolServerOptions is ProtocolServerOptions for a given local
// version, for tests of the window.
func protocolServerOptions(local int) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := checkProtocol(ctx, local); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := checkProtocol(ss.Context(), local); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
}

// ProtocolDialOptions send this build's PeerProtocol on every call of a
// client dialed with them (a PeerClient has them): for a tool or test
// that calls sluice.v1.Peer itself, since a call without the header comes
// from protocol 0, outside the window of protocol 2.
func ProtocolDialOptions() []grpc.DialOption { return protocolDialOptions(PeerProtocol) }

// protocolDialOptions send this node's peer protocol version on every
// call of a PeerClient.
func protocolDialOptions(local int) []grpc.DialOption {
	v := strconv.Itoa(local)
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, inv grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return inv(metadata.AppendToOutgoingContext(ctx, ProtocolHeader, v), method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, s grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return s(metadata.AppendToOutgoingContext(ctx, ProtocolHeader, v), desc, cc, method, opts...)
		}),
	}
}
