package node_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-rl/sluice/internal/testcerts"
	"github.com/sluice-rl/sluice/node"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// rateLimiter dials addr's public gRPC API with opt and returns a
// RateLimiter client.
func rateLimiter(t *testing.T, addr string, opt grpc.DialOption) sluicev1.RateLimiterClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return sluicev1.NewRateLimiterClient(cc)
}

// checkNew spends 1 of a day-long inline limit of key through rl and
// returns the item's result.
func checkNew(t *testing.T, rl sluicev1.RateLimiterClient, key string) *sluicev1.CheckResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := rl.Check(ctx, &sluicev1.CheckRequest{Items: []*sluicev1.CheckItem{{Key: key,
		Spec: &sluicev1.CheckItem_Limit{Limit: &sluicev1.Limit{Limit: 10, Period: durationpb.New(24 * time.Hour)}}}}})
	if err != nil {
		t.Fatalf("Check %s: %v", key, err)
	}
	return resp.GetResults()[0]
}

// Under mTLS, the live keys each client identity creates are capped
// (--max-keys-per-client): a new key beyond the cap is RESOURCE_EXHAUSTED
// with a message naming the flag and the cap; the client's stored keys
// keep working, and other identities are not held back.
func TestMaxKeysPerClientUnderMTLS(t *testing.T) {
	p := newPKI(t)
	n := startNode(t, func(c *node.Config) { p.mtls(c); c.Store.MaxKeysPerClient = 3 })
	a := rateLimiter(t, n.GRPCAddr(), grpc.WithTransportCredentials(credentials.NewTLS(testcerts.ClientConfig(t, p.public.PEM, &p.client))))
	other := p.public.Client(t, "another-service")
	b := rateLimiter(t, n.GRPCAddr(), grpc.WithTransportCredentials(credentials.NewTLS(testcerts.ClientConfig(t, p.public.PEM, &other))))

	for i := range 3 {
		if r := checkNew(t, a, "a:"+strconv.Itoa(i)); r.GetError() != nil || !r.GetAllowed() {
			t.Fatalf("client a's key %d: %+v", i, r)
		}
	}
	r := checkNew(t, a, "a:3")
	if codes.Code(r.GetError().GetCode()) != codes.ResourceExhausted || r.GetAllowed() ||
		!strings.Contains(r.GetError().GetMessage(), "--max-keys-per-client 3") {
		t.Fatalf("client a's 4th key: %+v, want RESOURCE_EXHAUSTED naming --max-keys-per-client 3", r)
	}
	for _, key := range []string{"a:0", "b:0", "b:1", "b:2"} {
		if r := checkNew(t, b, key); r.GetError() != nil || !r.GetAllowed() {
			t.Fatalf("client b, key %s: %+v", key, r)
		}
	}
	if r := checkNew(t, a, "a:1"); r.GetError() != nil || !r.GetAllowed() {
		t.Fatalf("client a's stored key at its cap: %+v", r)
	}
}

// Without mTLS there is no identity to count: no cap.
func TestMaxKeysPerClientNeedsMTLS(t *testing.T) {
	n := startNode(t, func(c *node.Config) { c.Store.MaxKeysPerClient = 3 })
	rl := rateLimiter(t, n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	for i := range 10 {
		if r := checkNew(t, rl, "k:"+strconv.Itoa(i)); r.GetError() != nil || !r.GetAllowed() {
			t.Fatalf("key %d without mTLS: %+v", i, r)
		}
	}
}
