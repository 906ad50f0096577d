// Command gubernator runs Gubernator v2 (github.com/gubernator-io/gubernator),
// the distributed rate limiter that `make bench-compare` measures beside
// Sluice, built from the Go module proxy at the version this nested module's
// go.mod pins, so that the main go.mod stays clean:
//
//	make gubref    # builds bin/gubernator from this module
//
// It is Gubernator's own daemon (gubernator.SetupDaemonConfig and
// SpawnDaemon, configured by the GUBER_* environment as its
// cmd/gubernator is) with one difference: the memberlist node name is the
// instance ID (GUBER_INSTANCE_ID) rather than the host name, which
// Gubernator's configuration cannot set. Without it, three instances on one
// machine share one memberlist name, refuse each other ("Conflicting
// address") and each serves alone. Tracing is left off (Gubernator's command
// starts an OTLP exporter by default).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/gubernator-io/gubernator/v2"
	"github.com/sirupsen/logrus"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gubernator:", err)
		os.Exit(1)
	}
}

func run() error {
	conf, err := gubernator.SetupDaemonConfig(logrus.StandardLogger(), nil)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	conf.MemberListPoolConf.NodeName = conf.InstanceID
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d, err := gubernator.SpawnDaemon(ctx, conf)
	if err != nil {
		return fmt.Errorf("spawn: %w", err)
	}
	<-ctx.Done()
	d.Close()
	return nil
}
