package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/internal/version"
)

// TestVersionPrintsTagAndCommit: `sluice version` prints the linker-set
// release tag and commit; an argument is an error naming it.
func TestVersionPrintsTagAndCommit(t *testing.T) {
	old, oldCommit := version.Version, version.Commit
	t.Cleanup(func() { version.Version, version.Commit = old, oldCommit })
	version.Version, version.Commit = "v9.8.7", "abc1234"

	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"version"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	if !strings.HasPrefix(out.String(), "sluice v9.8.7 (commit abc1234) go") {
		t.Errorf("output %q, want it to start with %q", out.String(), "sluice v9.8.7 (commit abc1234) go")
	}

	out.Reset()
	errOut.Reset()
	if code := run(context.Background(), []string{"version", "extra"}, &out, &errOut); code != exitError {
		t.Fatalf("exit %d with an argument, want %d", code, exitError)
	}
	if !strings.Contains(errOut.String(), `"extra"`) {
		t.Errorf("stderr %q does not name the argument", errOut.String())
	}
}
