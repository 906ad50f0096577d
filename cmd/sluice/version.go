package main

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/sluice-rl/sluice/internal/version"
)

func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fmt.Fprintf(stdout, "sluice %s %s %s/%s\n", version.String(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
