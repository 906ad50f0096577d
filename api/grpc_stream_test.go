package api

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// startStreamServer serves the gRPC API of a real limiter on :0 and
// returns the server and a stream to it.
func startStreamServer(t *testing.T) (*GRPC, sluicev1.RateLimiter_CheckStreamClient) {
	t.Helper()
	lim := newTestLimiter(t, "policies:\n  per-ip:\n    limit: 5\n    period: 1m\n")
	g, conn := serveGRPC(t, GRPCConfig{Service: lim})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	st, err := sluicev1.NewRateLimiterClient(conn).CheckStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return g, st
}

func streamItem(key string, limit int64) *sluicev1.CheckItem {
	return &sluicev1.CheckItem{Key: key, Spec: &sluicev1.CheckItem_Limit{Limit: &sluicev1.Limit{Limit: limit, Period: durationpb.New(time.Hour)}}}
}

// The items of one message are decided on their own: invalid ones get an
// INVALID_ARGUMENT result naming the field, and the others are decided.
func TestCheckStreamItemsIndependent(t *testing.T) {
	_, st := startStreamServer(t)
	msg := &sluicev1.CheckStreamRequest{Id: 42, Items: []*sluicev1.CheckItem{
		streamItem("a", 10),
		streamItem("b", 0),
		{Key: "c", Spec: &sluicev1.CheckItem_Policy{Policy: "nope"}},
		{Key: "", Spec: &sluicev1.CheckItem_Policy{Policy: "per-ip"}},
		{Key: "d", Spec: &sluicev1.CheckItem_Policy{Policy: "per-ip"}},
	}}
	if err := st.Send(msg); err != nil {
		t.Fatal(err)
	}
	resp, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetId() != 42 || len(resp.GetResults()) != 5 {
		t.Fatalf("answer id %d with %d results, want id 42 and 5", resp.GetId(), len(resp.GetResults()))
	}
	for i, want := range []struct {
		allowed bool
		field   string
	}{{true, ""}, {false, "limit.limit"}, {false, "policy"}, {false, "key"}, {true, ""}} {
		r := resp.GetResults()[i]
		if r.GetAllowed() != want.allowed || r.GetError().GetField() != want.field {
			t.Errorf("item %d: allowed %v, error %v; want allowed %v, field %q", i, r.GetAllowed(), r.GetError(), want.allowed, want.field)
		}
		if want.field != "" && codes.Code(r.GetError().GetCode()) != codes.InvalidArgument {
			t.Errorf("item %d: code %d, want INVALID_ARGUMENT", i, r.GetError().GetCode())
		}
	}
	if r := resp.GetResults()[4]; r.GetRemaining() != 4 || r.GetOwner() != "node-a" {
		t.Errorf("per-ip check: remaining %d owner %q, want 4 and node-a", r.GetRemaining(), r.GetOwner())
	}
}

// Messages sent back to back are each answered under their own id, and a
// key's count carries over from one message to the next.
func TestCheckStreamPipelined(t *testing.T) {
	_, st := startStreamServer(t)
	for id := uint64(1); id <= 20; id++ {
		if err := st.Send(&sluicev1.CheckStreamRequest{Id: id, Items: []*sluicev1.CheckItem{streamItem("k", 10)}}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[uint64]bool{}
	allowed := 0
	for range 20 {
		resp, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		seen[resp.GetId()] = true
		if resp.GetResults()[0].GetAllowed() {
			allowed++
		}
	}
	if len(seen) != 20 || allowed != 10 {
		t.Fatalf("%d distinct ids answered, %d allowed; want 20 and exactly 10", len(seen), allowed)
	}
}

// DrainStreams asks the client to close its side; what it sent before is
// still answered, then the stream ends cleanly.
func TestCheckStreamDrain(t *testing.T) {
	g, st := startStreamServer(t)
	if err := st.Send(&sluicev1.CheckStreamRequest{Id: 1, Items: []*sluicev1.CheckItem{streamItem("k", 10)}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := st.Recv(); err != nil || resp.GetId() != 1 {
		t.Fatalf("first answer: %v %v", resp, err)
	}
	g.DrainStreams()
	resp, err := st.Recv()
	if err != nil || !resp.GetDrain() {
		t.Fatalf("after DrainStreams: %v %v, want a drain message", resp, err)
	}
	if err := st.Send(&sluicev1.CheckStreamRequest{Id: 2, Items: []*sluicev1.CheckItem{streamItem("k", 10)}}); err != nil {
		t.Fatal(err)
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if resp, err := st.Recv(); err != nil || resp.GetId() != 2 {
		t.Fatalf("answer sent after the drain notice: %v %v", resp, err)
	}
	if _, err := st.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last answer: %v, want io.EOF (a clean end)", err)
	}
}
