package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rl/sluice/node"
)

// conformanceDir holds the Envoy RLS conformance cases and the answers
// envoyproxy/ratelimit gave to them (tools/rlsref records them; see its
// README.md).
const conformanceDir = "testdata/rls-conformance"

// conformanceCase is one case's config directory and recorded steps.
type conformanceCase struct {
	name      string
	configDir string
	steps     []conformanceStep
}

// conformanceStep is one recorded call: the request, when it was sent, and
// the reference's response or gRPC error.
type conformanceStep struct {
	Note         string          `json:"note"`
	Request      json.RawMessage `json:"request"`
	SentUnixNano int64           `json:"sent_unix_nano"`
	Response     json.RawMessage `json:"response"`
	Error        *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`

	req  *rlspb.RateLimitRequest
	want *rlspb.RateLimitResponse
	pin  *pinnedStep
}

// divergences is <case>/divergences.json: the steps at which Sluice answers
// otherwise than the reference, on purpose, why, and Sluice's answer (a
// response or an error), which the replay then requires instead. They are
// the only exceptions to answering as the reference.
type divergences struct {
	Why   string       `json:"why"`
	Steps []pinnedStep `json:"steps"`
}

type pinnedStep struct {
	Step   int `json:"step"`
	Sluice struct {
		Response json.RawMessage `json:"response"`
		Error    *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	} `json:"sluice"`

	want *rlspb.RateLimitResponse
}

// loadConformance reads every case's golden, in the order they were
// recorded (the first step's time).
func loadConformance(t *testing.T) []conformanceCase {
	t.Helper()
	entries, err := os.ReadDir(conformanceDir)
	if err != nil {
		t.Fatal(err)
	}
	var cases []conformanceCase
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(conformanceDir, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, "golden.json"))
		if err != nil {
			t.Fatalf("%s: %v (make rls-record RLS_FLAGS='--only %s' records it)", e.Name(), err, e.Name())
		}
		var g struct {
			Steps []conformanceStep `json:"steps"`
		}
		if err := json.Unmarshal(b, &g); err != nil {
			t.Fatalf("%s/golden.json: %v", e.Name(), err)
		}
		if len(g.Steps) == 0 {
			t.Fatalf("%s/golden.json: no steps", e.Name())
		}
		for i := range g.Steps {
			st := &g.Steps[i]
			st.req = &rlspb.RateLimitRequest{}
			if err := protojson.Unmarshal(st.Request, st.req); err != nil {
				t.Fatalf("%s step %d: request: %v", e.Name(), i, err)
			}
			if (st.Response == nil) == (st.Error == nil) {
				t.Fatalf("%s step %d: want exactly one of response and error", e.Name(), i)
			}
			if st.Response != nil {
				st.want = &rlspb.RateLimitResponse{}
				if err := protojson.Unmarshal(st.Response, st.want); err != nil {
					t.Fatalf("%s step %d: response: %v", e.Name(), i, err)
				}
			}
		}
		if err := loadDivergences(dir, g.Steps); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		cases = append(cases, conformanceCase{name: e.Name(), configDir: filepath.Join(dir, "config"), steps: g.Steps})
	}
	if len(cases) == 0 {
		t.Fatalf("no cases in %s", conformanceDir)
	}
	slices.SortFunc(cases, func(a, b conformanceCase) int {
		return int(a.steps[0].SentUnixNano - b.steps[0].SentUnixNano)
	})
	return cases
}

// replay sends a case's steps, the clock set to each step's recorded time,
// to the nodes' clients in turn, and reports every answer that differs
// from the reference's.
func replay(t *testing.T, c conformanceCase, clk *fakeClock, clients []rlspb.RateLimitServiceClient) {
	t.Helper()
	for i, st := range c.steps {
		clk.ns.Store(st.SentUnixNano)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := clients[i%len(clients)].ShouldRateLimit(ctx, st.req)
		cancel()
		at := time.Unix(0, st.SentUnixNano).UTC().Format(time.RFC3339)
		var req bytes.Buffer
		_ = json.Compact(&req, st.Request)
		if st.pin != nil {
			// A pinned divergence: Sluice's own answer, checked as exactly.
			if e := st.pin.Sluice.Error; e != nil {
				got := status.Convert(err)
				field, _, _ := strings.Cut(e.Message, ": ")
				if err == nil || got.Code().String() != e.Code || got.Message() != e.Message || (e.Code == "InvalidArgument" && !badRequestNames(got, field)) {
					t.Errorf("%s step %d (%s, at %s): pinned divergence\n  request: %s\n  pinned:  error %s: %q (with a BadRequest naming %s)\n  sluice:  %s",
						c.name, i, st.Note, at, req.String(), e.Code, e.Message, field, answerText(resp, err))
				}
			} else if err != nil || !proto.Equal(resp, st.pin.want) {
				t.Errorf("%s step %d (%s, at %s): pinned divergence\n  request: %s\n  pinned:  %s\n  sluice:  %s",
					c.name, i, st.Note, at, req.String(), st.pin.Sluice.Response, answerText(resp, err))
			}
			continue
		}
		switch {
		case st.Error != nil:
			got := status.Convert(err)
			if err == nil || got.Code().String() != st.Error.Code || got.Message() != st.Error.Message {
				t.Errorf("%s step %d (%s, at %s)\n  request:   %s\n  reference: error %s: %q\n  sluice:    %s",
					c.name, i, st.Note, at, req.String(), st.Error.Code, st.Error.Message, answerText(resp, err))
			}
		case err != nil || !proto.Equal(resp, st.want):
			var want bytes.Buffer
			_ = json.Compact(&want, st.Response)
			t.Errorf("%s step %d (%s, at %s)\n  request:   %s\n  reference: %s\n  sluice:    %s",
				c.name, i, st.Note, at, req.String(), want.String(), answerText(resp, err))
		}
	}
}

// badRequestNames reports whether st has a BadRequest detail naming field.
func badRequestNames(st *status.Status, field string) bool {
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				if v.GetField() == field {
					return true
				}
			}
		}
	}
	return false
}

// loadDivergences pins the steps of dir/divergences.json, if there is one.
func loadDivergences(dir string, steps []conformanceStep) error {
	b, err := os.ReadFile(filepath.Join(dir, "divergences.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	var d divergences
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return fmt.Errorf("divergences.json: %w", err)
	}
	if d.Why == "" {
		return errors.New("divergences.json: no why")
	}
	for i := range d.Steps {
		p := &d.Steps[i]
		switch {
		case p.Step < 0 || p.Step >= len(steps):
			return fmt.Errorf("divergences.json: step %d: the case has %d steps", p.Step, len(steps))
		case (p.Sluice.Response == nil) == (p.Sluice.Error == nil):
			return fmt.Errorf("divergences.json: step %d: want exactly one of response and error", p.Step)
		case p.Sluice.Response != nil:
			p.want = &rlspb.RateLimitResponse{}
			if err := protojson.Unmarshal(p.Sluice.Response, p.want); err != nil {
				return fmt.Errorf("divergences.json: step %d: %w", p.Step, err)
			}
		}
		steps[p.Step].pin = p
	}
	return nil
}

func answerText(resp *rlspb.RateLimitResponse, err error) string {
	if err != nil {
		st := status.Convert(err)
		return "error " + st.Code().String() + ": " + st.Message()
	}
	b, _ := protojson.Marshal(resp)
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return string(b)
	}
	return out.String()
}

// Every conformance case, replayed on a node of its own whose clock reads
// each step's recorded time, over real gRPC: Sluice answers exactly what
// envoyproxy/ratelimit answered, but at the steps a case's
// divergences.json pins, on purpose, to Sluice's own answer.
func TestRLSConformance(t *testing.T) {
	for _, c := range loadConformance(t) {
		t.Run(c.name, func(t *testing.T) {
			clk := newFakeClock()
			clk.ns.Store(c.steps[0].SentUnixNano)
			n := startNode(t, func(cfg *node.Config) {
				cfg.RLSConfig = c.configDir
				cfg.Clock = clk.Now
			})
			replay(t, c, clk, []rlspb.RateLimitServiceClient{rlsClient(t, n.GRPCAddr())})
		})
	}
}

// The same cases on a 3-node cluster, each call to the next node: three
// nodes answer as one (each descriptor counted by its owner). The cluster
// loads every case's config (their domains are distinct) and replays the
// cases in the order they were recorded, so that its one clock only moves
// forward.
func TestRLSConformanceCluster(t *testing.T) {
	cases := loadConformance(t)
	all := t.TempDir()
	domains := map[string]string{}
	for _, c := range cases {
		files, err := filepath.Glob(filepath.Join(c.configDir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var head struct {
				Domain string `yaml:"domain"`
			}
			if err := yaml.Unmarshal(b, &head); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if other, dup := domains[head.Domain]; dup {
				t.Fatalf("domain %q is in cases %s and %s: every case needs its own domains", head.Domain, other, c.name)
			}
			domains[head.Domain] = c.name
			if err := os.WriteFile(filepath.Join(all, c.name+"-"+filepath.Base(f)), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	tc := newTestCluster0(t, 3, func(cfg *node.Config) { cfg.RLSConfig = all })
	tc.clk.ns.Store(cases[0].steps[0].SentUnixNano)
	var clients []rlspb.RateLimitServiceClient
	for _, n := range tc.nodes {
		clients = append(clients, rlsClient(t, n.GRPCAddr()))
	}
	for _, c := range cases {
		replay(t, c, tc.clk, clients)
	}
}
