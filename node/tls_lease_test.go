package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/internal/testcerts"
	"github.com/sluice-rl/sluice/node"
)

var leaseLimit = client.Limit{Algorithm: client.Concurrency, Limit: 2, Period: time.Hour}

// acquireOK takes a lease of 1 unit of key through c, failing the test
// unless it is granted.
func acquireOK(t *testing.T, c *client.Client, key string) client.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := c.Acquire(ctx, key, "", leaseLimit, 1, time.Hour)
	if err != nil || !l.Allowed || l.ID == "" {
		t.Fatalf("Acquire(%s) = %+v, %v", key, l, err)
	}
	return l
}

// release returns l through c and reports whether it was released.
func release(t *testing.T, c *client.Client, l client.Lease) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ok, err := c.Release(ctx, l)
	if err != nil {
		t.Fatalf("Release(%s): %v", l.Key, err)
	}
	return ok
}

// checkHolderBinding: a lease A acquired through ca is not released by
// B (through cb) with A's ID and key, stays held (a second acquire fills
// the limit of 2, a third is denied), and is released by A.
func checkHolderBinding(t *testing.T, ca, cb *client.Client, key string) {
	t.Helper()
	la := acquireOK(t, ca, key)
	if release(t, cb, la) {
		t.Fatalf("%s: another client identity released A's lease with A's ID", key)
	}
	lb := acquireOK(t, cb, key)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if l, err := cb.Acquire(ctx, key, "", leaseLimit, 1, time.Hour); err != nil || l.Allowed {
		t.Fatalf("%s: third acquire = %+v, %v; want denied (A's lease still held)", key, l, err)
	}
	if !release(t, ca, la) {
		t.Fatalf("%s: A could not release its own lease", key)
	}
	if release(t, ca, la) {
		t.Fatalf("%s: A's lease released twice", key)
	}
	if release(t, ca, lb) {
		t.Fatalf("%s: A released B's lease", key)
	}
	if !release(t, cb, lb) {
		t.Fatalf("%s: B could not release its own lease", key)
	}
}

// Over public mTLS, a lease is bound to the client certificate that took
// it: another client certificate of the same CA, holding the ID, cannot
// release it.
func TestTLSLeaseBoundToClientCert(t *testing.T) {
	p := newPKI(t)
	n := startNode(t, p.mtls)
	other := p.public.Client(t, "b-service")
	ca := tlsClient(t, testcerts.ClientConfig(t, p.public.PEM, &p.client), n.GRPCAddr())
	cb := tlsClient(t, testcerts.ClientConfig(t, p.public.PEM, &other), n.GRPCAddr())
	checkHolderBinding(t, ca, cb, "lease-key")
	// A renewed certificate with the same names is the same holder.
	renewed := p.public.Client(t, "a-service")
	la := acquireOK(t, ca, "renewed-key")
	if !release(t, tlsClient(t, testcerts.ClientConfig(t, p.public.PEM, &renewed), n.GRPCAddr()), la) {
		t.Fatal("a renewed certificate with the same names could not release the lease")
	}
}

// Without client certificates there is no holder: the ID alone releases
// the lease, from any connection.
func TestTLSLeaseWithoutClientCA(t *testing.T) {
	p := newPKI(t)
	n := startNode(t, func(c *node.Config) {
		c.TLSCertFile, c.TLSKeyFile = p.serverCert, p.serverKey
		c.PeerTLSCertFile, c.PeerTLSKeyFile, c.PeerTLSCAFile = p.peerCert, p.peerKey, p.peerCAFile
	})
	la := acquireOK(t, tlsClient(t, testcerts.ClientConfig(t, p.public.PEM, nil), n.GRPCAddr()), "k")
	if !release(t, tlsClient(t, testcerts.ClientConfig(t, p.public.PEM, nil), n.GRPCAddr()), la) {
		t.Fatal("without a holder, the ID did not release the lease from another connection")
	}
}

// Through a 3-node mTLS cluster, the binding holds on the owner when the
// node a client calls forwards: A and B call a node that does not own the
// key.
func TestTLSLeaseBindingForwarded(t *testing.T) {
	p := newPKI(t)
	tc := &testCluster{t: t, clk: newFakeClock(), stops: map[string]func(){}}
	for i := range 3 {
		tc.addWith(fmt.Sprintf("n%d", i), p.mtls)
	}
	tc.waitConverged()
	n := tc.nodes[0]
	other := p.public.Client(t, "b-service")
	ca := tlsClient(t, testcerts.ClientConfig(t, p.public.PEM, &p.client), n.GRPCAddr())
	cb := tlsClient(t, testcerts.ClientConfig(t, p.public.PEM, &other), n.GRPCAddr())
	for i := range 50 {
		key := fmt.Sprintf("fwd-lease-%d", i)
		l := acquireOK(t, ca, key)
		if !release(t, ca, l) {
			t.Fatalf("%s: release of a probe lease failed", key)
		}
		if l.Owner == n.Name() {
			continue
		}
		checkHolderBinding(t, ca, cb, key)
		return
	}
	t.Fatal("no key of 50 is owned by another node")
}
