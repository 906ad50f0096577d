package transport

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// startVersionedPeer serves a fake peer whose peer protocol is local,
// checked by the interceptors node installs, on a loopback :0 port.
func startVersionedPeer(t *testing.T, local int) ring.Member {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(protocolServerOptions(local)...)
	registerPeer(t, s, newFakePeer(t, store.Config{}), "owner", nil)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = s.Serve(lis)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-served
	})
	return ring.Member{Name: "owner", GRPCAddr: lis.Addr().String()}
}

func TestProtocolCompatible(t *testing.T) {
	for _, tc := range []struct {
		a, b int
		want bool
	}{
		{1, 1, true}, {1, 0, true}, {0, 1, true}, {2, 1, true}, {5, 4, true},
		{1, 3, false}, {3, 1, false}, {0, 2, false}, {1, -1, false}, {-1, 0, false},
	} {
		if got := ProtocolCompatible(tc.a, tc.b); got != tc.want {
			t.Errorf("ProtocolCompatible(%d, %d) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestPeerProtocolWindow: a node of protocol 2 takes calls from nodes of
// 1, 2 and 3, refuses 0 (no header) and 4 with an error naming both
// versions, and answers a malformed header with InvalidArgument naming
// it; on the unary calls and on CheckStream.
func TestPeerProtocolWindow(t *testing.T) {
	m := startVersionedPeer(t, 2)
	rpc := rawPeerClient(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := &sluicev1.PeerCheckRequest{From: "n1", Items: []*sluicev1.PeerItem{tokenItem(1, 10, 1)}}

	for _, tc := range []struct {
		name   string
		header []string // values of the header; none: not sent
		code   codes.Code
		text   string // in the message
	}{
		{"same", []string{"2"}, codes.OK, ""},
		{"previous", []string{"1"}, codes.OK, ""},
		{"next", []string{"3"}, codes.OK, ""},
		{"missing is 0", nil, codes.Unimplemented, "the calling node speaks peer protocol 0, this node 2"},
		{"two older", []string{"0"}, codes.Unimplemented, "the calling node speaks peer protocol 0, this node 2"},
		{"two newer", []string{"4"}, codes.Unimplemented, "the calling node speaks peer protocol 4, this node 2"},
		{"not a number", []string{"two"}, codes.InvalidArgument, "metadata sluice-peer-protocol"},
		{"negative", []string{"-1"}, codes.InvalidArgument, "metadata sluice-peer-protocol"},
		{"huge", []string{"99999999999999999999"}, codes.InvalidArgument, "metadata sluice-peer-protocol"},
		{"twice", []string{"2", "2"}, codes.InvalidArgument, "must be given once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cctx := ctx
			for _, v := range tc.header {
				cctx = metadata.AppendToOutgoingContext(cctx, ProtocolHeader, v)
			}
			_, err := rpc.Check(cctx, req)
			checkProtocolErr(t, "Check", err, tc.code, tc.text)

			sctx, scancel := context.WithCancel(cctx)
			defer scancel()
			stream, err := rpc.CheckStream(sctx)
			if err == nil {
				// A refused stream may end before Send (io.EOF); Recv
				// then returns its status.
				_ = stream.Send(&sluicev1.PeerCheckStreamRequest{Id: 1, Request: req})
				_, err = stream.Recv()
			}
			checkProtocolErr(t, "CheckStream", err, tc.code, tc.text)
		})
	}
}

func checkProtocolErr(t *testing.T, call string, err error, code codes.Code, text string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s: %v, want code %v", call, err, code)
	}
	if err == nil {
		return
	}
	if !strings.Contains(err.Error(), text) {
		t.Errorf("%s: %q does not say %q", call, err, text)
	}
	if code == codes.InvalidArgument {
		var br *errdetails.BadRequest
		for _, d := range status.Convert(err).Details() {
			if b, ok := d.(*errdetails.BadRequest); ok {
				br = b
			}
		}
		if br == nil || len(br.GetFieldViolations()) != 1 || br.GetFieldViolations()[0].GetField() != "metadata "+ProtocolHeader {
			t.Errorf("%s: details %v, want a BadRequest naming metadata %s", call, status.Convert(err).Details(), ProtocolHeader)
		}
	}
}

// TestPeerClientSendsProtocol: a PeerClient's calls carry PeerProtocol: a
// peer one version ahead answers them; one two versions ahead refuses
// them, and the caller's error is a peer-unavailable one naming both
// versions.
func TestPeerClientSendsProtocol(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	items := []limiter.Forwarded{{Hash: 1, Limit: tbLimit(3), Cost: 1}}

	c := newTestPeerClient(t, PeerClientConfig{Self: "n1", BreakerFailures: -1})
	out := make([]limiter.Answer, 1)
	if err := c.Check(ctx, startVersionedPeer(t, PeerProtocol+1), 0, items, out); err != nil || !out[0].Allowed || out[0].Err != nil {
		t.Fatalf("Check to a peer one protocol ahead: %v, %+v; want allowed", err, out[0])
	}

	far := startVersionedPeer(t, PeerProtocol+2)
	out[0] = limiter.Answer{}
	err := c.Check(ctx, far, 0, items, out)
	if err == nil {
		err = out[0].Err
	}
	want := "the calling node speaks peer protocol " + strconv.Itoa(PeerProtocol) + ", this node " + strconv.Itoa(PeerProtocol+2)
	if !errors.Is(err, limiter.ErrPeerUnavailable) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Check to a peer two protocols ahead: %v; want a peer-unavailable error saying %q", err, want)
	}
	if _, _, err := c.Acquire(ctx, far, 0, items[0], time.Second); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Acquire to a peer two protocols ahead: %v; want an error saying %q", err, want)
	}
}
