package node_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/transport"
)

// TestPeerPortRefusesIncompatibleProtocol: a node's peer service checks
// the caller's peer protocol (transport.ProtocolServerOptions is wired):
// a caller two versions ahead is refused with both versions named.
func TestPeerPortRefusesIncompatibleProtocol(t *testing.T) {
	n := startNode(t, nil)
	cc, err := grpc.NewClient(n.PeerAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	far := transport.PeerProtocol + 2
	ctx = metadata.AppendToOutgoingContext(ctx, transport.ProtocolHeader, strconv.Itoa(far))
	_, err = sluicev1.NewPeerClient(cc).Check(ctx, &sluicev1.PeerCheckRequest{From: "n9"})
	want := "the calling node speaks peer protocol " + strconv.Itoa(far) + ", this node " + strconv.Itoa(transport.PeerProtocol)
	if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), want) {
		t.Fatalf("Peer.Check from protocol %d: %v; want Unimplemented saying %q", far, err, want)
	}
}
