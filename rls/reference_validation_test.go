package rls_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-rl/sluice/rls"
)

// Every config of testdata/reference-validation is accepted by Load exactly
// when the reference's own config checker (envoyproxy/ratelimit's
// src/config_check_cmd) accepts it: verdict.json records what it said
// (tools/rlsref validate; make rls-validate).
func TestLoadAcceptsWhatTheReferenceAccepts(t *testing.T) {
	dirs, err := filepath.Glob("testdata/reference-validation/*/verdict.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 50 {
		t.Fatalf("%d verdicts in testdata/reference-validation", len(dirs))
	}
	for _, path := range dirs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Case     string `json:"case"`
			Accepted bool   `json:"accepted"`
			Message  string `json:"message"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		_, err = rls.Load(filepath.Join(filepath.Dir(path), "config"), rls.Options{})
		switch {
		case v.Accepted && err != nil:
			t.Errorf("%s: the reference accepts it; Load: %v", v.Case, err)
		case !v.Accepted && err == nil:
			t.Errorf("%s: the reference rejects it (%s); Load accepts it", v.Case, v.Message)
		}
	}
}
