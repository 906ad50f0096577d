package main

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/sluice-rl/sluice/internal/version"
)

// runVersion prints the release tag (v0.1.0; "dev" for a build without
// the Makefile's version), the commit, Go's version and the platform.
func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("takes no arguments, got %q", args[0])
	}
	fmt.Fprintf(stdout, "sluice %s (commit %s) %s %s/%s\n", version.String(), version.CommitString(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
