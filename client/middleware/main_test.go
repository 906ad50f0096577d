package middleware_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/node"
)

// testNode is the real Sluice node (node.New, as in production, on :0
// ports) that the tests and examples of this package share, started by
// the first that needs it (fuzz workers and the key function tests never
// do); each test uses its own rule names, so their keys do not meet.
var testNode struct {
	once   sync.Once
	n      *node.Node
	cancel context.CancelFunc
	done   chan error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if testNode.n != nil {
		testNode.cancel()
		if err := <-testNode.done; err != nil {
			fmt.Fprintln(os.Stderr, "node: Run:", err)
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// startNode starts the test node once and waits until it is ready; it
// panics if it cannot (tests and examples alike need it).
func startNode() *node.Node {
	testNode.once.Do(func() {
		n, err := node.New(node.LocalConfig("mw"))
		if err != nil {
			panic(fmt.Sprintf("node.New: %v", err))
		}
		ctx, cancel := context.WithCancel(context.Background())
		testNode.n, testNode.cancel, testNode.done = n, cancel, make(chan error, 1)
		go func() { testNode.done <- n.Run(ctx) }()
		for deadline := time.Now().Add(15 * time.Second); !n.Ready(); {
			if time.Now().After(deadline) {
				panic("the test node did not become ready in 15s")
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	return testNode.n
}

// sluiceAddr is the gRPC address of the test node.
func sluiceAddr() string { return startNode().GRPCAddr() }

// sluiceHTTP is the address of the test node's HTTP API.
func sluiceHTTP() string { return startNode().HTTPAddr() }

// newClient is a client of the test node, closed when t ends.
func newClient(t testing.TB) *client.Client {
	t.Helper()
	return clientOf(t, sluiceAddr(), 10*time.Second)
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
