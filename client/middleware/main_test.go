package middleware_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/node"
)

// sluiceAddr is the gRPC address of the real Sluice node (node.New, as in
// production, on :0 ports) that the tests and examples of this package
// share; each test uses its own rule names, so their keys do not meet.
var sluiceAddr string

// sluiceHTTP is the address of that node's HTTP API.
var sluiceHTTP string

func TestMain(m *testing.M) {
	code := run(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func run(m *testing.M) int {
	n, err := node.New(node.LocalConfig("mw"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "node.New:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "node: Run:", err)
		}
	}()
	for deadline := time.Now().Add(15 * time.Second); !n.Ready(); {
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "the node did not become ready in 15s")
			return 1
		}
		time.Sleep(5 * time.Millisecond)
	}
	sluiceAddr, sluiceHTTP = n.GRPCAddr(), n.HTTPAddr()
	return m.Run()
}

// newClient is a client of the test node, closed when t ends.
func newClient(t testing.TB) *client.Client {
	t.Helper()
	return clientOf(t, sluiceAddr, 10*time.Second)
}

// unreachableClient is a client of a closed port: no Sluice answers it.
func unreachableClient(t testing.TB) *client.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return clientOf(t, addr, 500*time.Millisecond)
}

func clientOf(t testing.TB, addr string, timeout time.Duration) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{Addrs: []string{addr}, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
