package api

import (
	"context"
	"testing"
	"time"

	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// A grant request rides a check stream as an up_to item: it gets what the
// bucket has, up to cost, then nothing with a retry-after; the grant it
// names can be given back with Grant's return_grant.
func TestCheckStreamGrantRequest(t *testing.T) {
	c := startGRPCClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := c.CheckStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.CloseSend() }()
	ten := lim(sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET, 10, time.Hour, 0)
	steps := []struct {
		cost     int64
		granted  int64
		allowed  bool
		retrying bool
	}{
		{cost: 7, granted: 7, allowed: true},
		{cost: 7, granted: 3, allowed: true},
		{cost: 1, granted: 0, allowed: false, retrying: true},
	}
	var first *sluicev1.CheckResult
	for i, s := range steps {
		if err := st.Send(&sluicev1.CheckStreamRequest{Id: uint64(i + 1), Items: []*sluicev1.CheckItem{upTo(withLimit("g", ten, i64(s.cost)))}}); err != nil {
			t.Fatal(err)
		}
		resp, err := st.Recv()
		if err != nil || len(resp.GetResults()) != 1 {
			t.Fatalf("step %d: %v %v", i, resp, err)
		}
		r := resp.GetResults()[0]
		if r.GetError() != nil || r.GetGranted() != s.granted || r.GetAllowed() != s.allowed ||
			(r.GetRetryAfter().AsDuration() > 0) != s.retrying {
			t.Fatalf("step %d: %+v, want granted %d allowed %v retrying %v", i, r, s.granted, s.allowed, s.retrying)
		}
		if s.granted > 0 && (r.GetGrantId() == 0 || r.GetIssuer() == "") {
			t.Fatalf("step %d: grant id %d issuer %q, want both", i, r.GetGrantId(), r.GetIssuer())
		}
		if i == 0 {
			first = r
		}
	}
	// Give back 5 of the first grant's 7: the bucket has 5 again.
	ret, err := c.Grant(ctx, &sluicev1.GrantRequest{Key: "g", Spec: &sluicev1.GrantRequest_Limit{Limit: ten}, Want: 5,
		ReturnGrant: first.GetGrantId(), Issuer: first.GetIssuer()})
	if err != nil || ret.GetReturned() != 5 {
		t.Fatalf("return: %v %v, want 5 returned", ret, err)
	}
	resp, err := c.Check(ctx, &sluicev1.CheckRequest{Items: []*sluicev1.CheckItem{withLimit("g", ten, i64(0))}})
	if err != nil || resp.GetResults()[0].GetRemaining() != 5 {
		t.Fatalf("after the return: %v %v, want 5 remaining", resp, err)
	}
}
