package main

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/node"
)

// --replicas takes auto (the default) or a count of heirs from 0 (off) to
// limiter.MaxReplicas; anything else is refused naming the flag.
func TestReplicasFlag(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want int
		err  bool
	}{
		{"", node.ReplicasAuto, false},
		{"auto", node.ReplicasAuto, false},
		{"0", 0, false},
		{"1", 1, false},
		{"3", 3, false},
		{"4", 0, true},
		{"-1", 0, true},
		{"two", 0, true},
	} {
		cfg := node.DefaultConfig()
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Var(replicasFlag{&cfg.Replicas}, "replicas", "")
		var args []string
		if tc.arg != "" {
			args = []string{"--replicas", tc.arg}
		}
		err := fs.Parse(args)
		switch {
		case tc.err && (err == nil || !strings.Contains(err.Error(), "-replicas") || !strings.Contains(err.Error(), "auto")):
			t.Errorf("--replicas %q: err = %v, want one naming -replicas and auto", tc.arg, err)
		case !tc.err && err != nil:
			t.Errorf("--replicas %q: %v", tc.arg, err)
		case !tc.err && cfg.Replicas != tc.want:
			t.Errorf("--replicas %q: Replicas = %d, want %d", tc.arg, cfg.Replicas, tc.want)
		}
	}
	if got := fs0().Lookup("replicas").DefValue; got != "auto" {
		t.Errorf("default shown as %q, want auto", got)
	}
}

func fs0() *flag.FlagSet {
	cfg := node.DefaultConfig()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.Var(replicasFlag{&cfg.Replicas}, "replicas", "")
	return fs
}
