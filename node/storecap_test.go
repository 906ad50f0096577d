package node_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-rl/sluice/node"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// At the store's memory cap, with every stored key a named policy's (which
// is never evicted), new keys are refused (RESOURCE_EXHAUSTED on gRPC, 503
// with a JSON body on HTTP) and counted; keys already stored keep working.
func TestStoreCapRefusesNewKeys(t *testing.T) {
	// A token bucket's state is estimated at 40 bytes: room for 4 keys.
	file := filepath.Join(t.TempDir(), "policies.yaml")
	writeFile(t, file, "policies:\n  tb:\n    algorithm: token_bucket\n    limit: 100\n    period: 1m\n")
	n := startNode(t, func(c *node.Config) { c.Store.MaxBytes = 160; c.PolicyFile = file })
	cc, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	rl := sluicev1.NewRateLimiterClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	check := func(key string, inline bool) *sluicev1.CheckResult {
		t.Helper()
		item := &sluicev1.CheckItem{Key: key, Spec: &sluicev1.CheckItem_Policy{Policy: "tb"}}
		if inline {
			item.Spec = &sluicev1.CheckItem_Limit{Limit: &sluicev1.Limit{Limit: 100, Period: durationpb.New(time.Minute)}}
		}
		resp, err := rl.Check(ctx, &sluicev1.CheckRequest{Items: []*sluicev1.CheckItem{item}})
		if err != nil {
			t.Fatalf("Check %s: %v", key, err)
		}
		return resp.GetResults()[0]
	}
	stored := 0
	for i := 0; i < 20; i++ {
		r := check("k"+strconv.Itoa(i), false)
		if r.GetError() != nil {
			if c := codes.Code(r.GetError().GetCode()); c != codes.ResourceExhausted || r.GetAllowed() {
				t.Fatalf("key %d: %v (allowed %v), want RESOURCE_EXHAUSTED", i, r.GetError(), r.GetAllowed())
			}
			break
		}
		stored++
	}
	if stored == 0 || stored >= 20 {
		t.Fatalf("%d keys stored before the cap, want a few", stored)
	}
	if r := check("k0", false); r.GetError() != nil || !r.GetAllowed() {
		t.Fatalf("a stored key at the cap: %+v", r)
	}
	// An inline key finds no evictable key to make room for it.
	if r := check("inline-new", true); codes.Code(r.GetError().GetCode()) != codes.ResourceExhausted {
		t.Fatalf("a new inline key in a store full of policy keys: %+v, want RESOURCE_EXHAUSTED", r)
	}

	// Acquire needs a new key too: the call fails with RESOURCE_EXHAUSTED.
	_, err = rl.Acquire(ctx, &sluicev1.AcquireRequest{Key: "lease-new", Spec: &sluicev1.AcquireRequest_Limit{
		Limit: &sluicev1.Limit{Algorithm: sluicev1.Algorithm_ALGORITHM_CONCURRENCY, Limit: 4}}})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("Acquire at the cap: %v, want ResourceExhausted", err)
	}

	// HTTP: 503, the item's error in JSON.
	resp, err := http.Post("http://"+n.HTTPAddr()+"/v1/check", "application/json",
		strings.NewReader(`{"checks":[{"key":"http-new","limit":100,"period":"1m"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Results []struct {
			Allowed bool
			Error   *struct{ Code, Message string }
		}
	}
	err = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Content-Type") != "application/json" ||
		len(body.Results) != 1 || body.Results[0].Error == nil || body.Results[0].Error.Code != "resource_exhausted" {
		t.Fatalf("HTTP at the cap: %d %+v (%v), want 503 with a resource_exhausted item", resp.StatusCode, body, err)
	}
	resp, err = http.Post("http://"+n.HTTPAddr()+"/v1/check", "application/json",
		strings.NewReader(`{"checks":[{"key":"k0","policy":"tb"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP, a stored key at the cap: %d", resp.StatusCode)
	}

	// Counted: sluice_store_refused_keys_total.
	resp, err = http.Get("http://" + n.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	refused := -1.0
	for _, line := range strings.Split(string(m), "\n") {
		if v, ok := strings.CutPrefix(line, "sluice_store_refused_keys_total "); ok {
			refused, _ = strconv.ParseFloat(v, 64)
		}
	}
	if refused < 4 {
		t.Fatalf("sluice_store_refused_keys_total = %v, want >= 4 (Check twice, Acquire, HTTP)", refused)
	}
}

// At the cap, inline-limit keys are evicted, least recently used first, to
// admit new keys: a store full of them still admits a named policy's key
// (and new inline keys), and the evictions are counted on /metrics.
func TestStoreCapEvictsInlineKeys(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policies.yaml")
	writeFile(t, file, "policies:\n  tb:\n    algorithm: token_bucket\n    limit: 100\n    period: 1m\n")
	// An inline token key is estimated at 80 bytes (its state and its last
	// use): room for a few (replication takes a share of the cap). One
	// shard: eviction looks for keys in the new key's shard, and with 4096
	// shards a handful of keys share none.
	n := startNode(t, func(c *node.Config) { c.Store.MaxBytes = 640; c.Store.Shards = 1; c.PolicyFile = file })
	cc, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	rl := sluicev1.NewRateLimiterClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	check := func(item *sluicev1.CheckItem) {
		t.Helper()
		resp, err := rl.Check(ctx, &sluicev1.CheckRequest{Items: []*sluicev1.CheckItem{item}})
		if err != nil {
			t.Fatalf("Check %s: %v", item.GetKey(), err)
		}
		if r := resp.GetResults()[0]; r.GetError() != nil || !r.GetAllowed() {
			t.Fatalf("Check %s: %+v, want allowed", item.GetKey(), r)
		}
	}
	long := &sluicev1.CheckItem_Limit{Limit: &sluicev1.Limit{Limit: 1, Period: durationpb.New(366 * 24 * time.Hour)}}
	for i := 0; i < 20; i++ {
		check(&sluicev1.CheckItem{Key: "tenant-a:" + strconv.Itoa(i), Spec: long})
	}
	check(&sluicev1.CheckItem{Key: "tenant-b", Spec: &sluicev1.CheckItem_Policy{Policy: "tb"}})

	resp, err := http.Get("http://" + n.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	got := map[string]float64{}
	for _, line := range strings.Split(string(m), "\n") {
		for _, name := range []string{`sluice_store_evictions_total{reason="lru"} `, `sluice_store_evictions_total{reason="expired"} `, "sluice_store_refused_keys_total "} {
			if v, ok := strings.CutPrefix(line, name); ok {
				got[name], _ = strconv.ParseFloat(v, 64)
			}
		}
	}
	if got[`sluice_store_evictions_total{reason="lru"} `] < 13 || got["sluice_store_refused_keys_total "] != 0 {
		t.Fatalf("metrics %v, want >= 13 LRU evictions (21 keys, room for at most 8) and none refused", got)
	}
	if _, ok := got[`sluice_store_evictions_total{reason="expired"} `]; !ok {
		t.Error(`no sluice_store_evictions_total{reason="expired"} series`)
	}
}
