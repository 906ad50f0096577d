package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// caseFile is DIR/<case>/case.json: what to send.
type caseFile struct {
	// Description says what the case shows.
	Description string `json:"description"`
	// Semantics names the point of the Semantics list it covers.
	Semantics string `json:"semantics"`
	// Steps are sent in order, on one connection.
	Steps []caseStep `json:"steps"`
}

// caseStep is one ShouldRateLimit call.
type caseStep struct {
	// Note says what the step expects, for a reader.
	Note string `json:"note,omitempty"`
	// NextSecond: the step is sent after the next wall-clock second starts
	// (otherwise in the same second as the step before it).
	NextSecond bool `json:"next_second,omitempty"`
	// Request is the RateLimitRequest, protojson.
	Request json.RawMessage `json:"request"`
}

// golden is DIR/<case>/golden.json: what the reference answered.
type golden struct {
	Case        string `json:"case"`
	Description string `json:"description"`
	Semantics   string `json:"semantics"`
	// Reference names the implementation and version that answered.
	Reference string `json:"reference"`
	// Attempts is how many runs it took to get every step within one
	// wall-clock second (a run whose steps straddle a second boundary is
	// run again on an empty Redis).
	Attempts int          `json:"attempts"`
	Steps    []goldenStep `json:"steps"`
}

// goldenStep is one recorded call.
type goldenStep struct {
	Note    string          `json:"note,omitempty"`
	Request json.RawMessage `json:"request"`
	// SentUnixNano and ReceivedUnixNano bracket the call (wall clock); both
	// are in the same second, the one the reference counted it in.
	SentUnixNano     int64 `json:"sent_unix_nano"`
	ReceivedUnixNano int64 `json:"received_unix_nano"`
	// Exactly one of Response (protojson RateLimitResponse) and Error.
	Response json.RawMessage `json:"response,omitempty"`
	Error    *grpcError      `json:"error,omitempty"`
}

// grpcError is a call's gRPC status.
type grpcError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// testCase is one loaded case.
type testCase struct {
	Name      string
	Dir       string
	ConfigDir string
	File      caseFile
	Requests  []*pb.RateLimitRequest
	// Pins are the steps at which Sluice answers otherwise on purpose
	// (DIR/<case>/divergences.json), with Sluice's answer.
	Pins map[int]answer
}

// divergencesFile is DIR/<case>/divergences.json (see
// node/rls_conformance_test.go).
type divergencesFile struct {
	Why   string `json:"why"`
	Steps []struct {
		Step   int `json:"step"`
		Sluice struct {
			Response json.RawMessage `json:"response"`
			Error    *grpcError      `json:"error"`
		} `json:"sluice"`
	} `json:"steps"`
}

// loadCases reads every case under dir, in name order; only, if not
// empty, keeps those named.
func loadCases(dir string, only []string) ([]*testCase, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var cases []*testCase
	for _, e := range entries {
		if !e.IsDir() || (len(only) > 0 && !slices.Contains(only, e.Name())) {
			continue
		}
		c, err := loadCase(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		cases = append(cases, c)
	}
	for _, name := range only {
		if !slices.ContainsFunc(cases, func(c *testCase) bool { return c.Name == name }) {
			return nil, fmt.Errorf("--only: no case %q in %s", name, dir)
		}
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("no cases in %s", dir)
	}
	return cases, nil
}

func loadCase(dir string) (*testCase, error) {
	c := &testCase{Name: filepath.Base(dir), Dir: dir, ConfigDir: filepath.Join(dir, "config")}
	b, err := os.ReadFile(filepath.Join(dir, "case.json"))
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c.File); err != nil {
		return nil, fmt.Errorf("%s/case.json: %w", c.Name, err)
	}
	if len(c.File.Steps) == 0 {
		return nil, fmt.Errorf("%s/case.json: no steps", c.Name)
	}
	if st, err := os.Stat(c.ConfigDir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%s: no config directory", c.Name)
	}
	for i, s := range c.File.Steps {
		req := &pb.RateLimitRequest{}
		if err := protojson.Unmarshal(s.Request, req); err != nil {
			return nil, fmt.Errorf("%s/case.json: step %d: request: %w", c.Name, i, err)
		}
		c.Requests = append(c.Requests, req)
	}
	if err := loadPins(c); err != nil {
		return nil, fmt.Errorf("%s/divergences.json: %w", c.Name, err)
	}
	return c, nil
}

// protoJSON is m as compact, stable JSON (protojson varies its whitespace
// on purpose; encoding/json's compaction removes it).
func protoJSON(m proto.Message) (json.RawMessage, error) {
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// writeGolden writes g to DIR/<case>/golden.json.
func writeGolden(c *testCase, g *golden) error {
	b, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	path := filepath.Join(c.Dir, "golden.json")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// splitList splits a comma-separated flag.
func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// loadPins reads the case's divergences.json, if any.
func loadPins(c *testCase) error {
	b, err := os.ReadFile(filepath.Join(c.Dir, "divergences.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	var d divergencesFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return err
	}
	c.Pins = map[int]answer{}
	for _, p := range d.Steps {
		if p.Step < 0 || p.Step >= len(c.Requests) {
			return fmt.Errorf("step %d: the case has %d steps", p.Step, len(c.Requests))
		}
		a := answer{Error: p.Sluice.Error}
		if p.Sluice.Response != nil {
			a.Response = &pb.RateLimitResponse{}
			if err := protojson.Unmarshal(p.Sluice.Response, a.Response); err != nil {
				return fmt.Errorf("step %d: %w", p.Step, err)
			}
		}
		c.Pins[p.Step] = a
	}
	return nil
}
