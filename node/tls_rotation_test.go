package node_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/big"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/internal/testcerts"
)

// servedSerial does a fresh TLS handshake with addr and returns the serial
// of the certificate served.
func servedSerial(t testing.TB, addr string, cfg *tls.Config) *big.Int {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Logf("handshake with %s: %v", addr, err)
		return nil
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber
}

// Rotating the certificate files in place, under continuous checks on
// established connections and on new ones, loses no check, and new
// handshakes see the new certificates, public and peer alike.
func TestTLSRotationLosesNoCheck(t *testing.T) {
	p := newPKI(t)
	tc := &testCluster{t: t, clk: newFakeClock(), stops: map[string]func(){}}
	for i := range 3 {
		tc.addWith(fmt.Sprintf("n%d", i), p.mtls)
	}
	tc.waitConverged()
	n0 := tc.nodes[0]
	ccfg := testcerts.ClientConfig(t, p.public.PEM, &p.client)

	var ok, failed atomic.Int64
	var firstErr atomic.Value
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	check := func(c *client.Client, key string) {
		if err := checkOnce(c, key); err != nil {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, err.Error())
			return
		}
		ok.Add(1)
	}
	for w := range 4 { // established connections, through every node
		c := tlsClient(t, ccfg, tc.nodes[w%3].GRPCAddr())
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				check(c, fmt.Sprintf("rot-%d-%d", w, i%500))
			}
		}()
	}
	wg.Add(1)
	go func() { // a new connection, so a new handshake, per check
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			c, err := client.New(client.Config{Addrs: []string{n0.GRPCAddr()}, DisableRouting: true, TLS: ccfg, Timeout: 3 * time.Second})
			if err != nil {
				t.Error(err)
				return
			}
			check(c, fmt.Sprintf("rot-new-%d", i%500))
			c.Close()
		}
	}()
	waitFor(t, 30*time.Second, "checks flowing", func() bool { return ok.Load() > 100 })

	oldPublic := servedSerial(t, n0.GRPCAddr(), ccfg)
	peerCfg := testcerts.ClientConfig(t, p.peer.PEM, &p.peerPair)
	peerCfg.ServerName = "sluice-peer"
	oldPeer := servedSerial(t, n0.PeerAddr(), peerCfg)
	if oldPublic == nil || oldPeer == nil {
		t.Fatal("no handshake before the rotation")
	}
	// In place, as cert-manager writes them: each file truncated and
	// rewritten, the certificate before its key, so handshakes in between
	// find a pair that does not match (and keep the old one).
	newServer := p.public.Server(t)
	newPeer := p.peer.Peer(t, "node", "sluice-peer")
	testcerts.Write(t, p.dir, "server.crt", newServer.Cert)
	testcerts.Write(t, p.dir, "peer.crt", newPeer.Cert)
	before := ok.Load()
	waitFor(t, 30*time.Second, "checks during the half rotation", func() bool { return ok.Load() > before+50 })
	testcerts.Write(t, p.dir, "server.key", newServer.Key)
	testcerts.Write(t, p.dir, "peer.key", newPeer.Key)

	waitFor(t, 30*time.Second, "the new public certificate served", func() bool {
		s := servedSerial(t, n0.GRPCAddr(), ccfg)
		return s != nil && s.Cmp(newServer.Leaf.SerialNumber) == 0
	})
	waitFor(t, 30*time.Second, "the new peer certificate served", func() bool {
		s := servedSerial(t, n0.PeerAddr(), peerCfg)
		return s != nil && s.Cmp(newPeer.Leaf.SerialNumber) == 0
	})
	before = ok.Load()
	waitFor(t, 30*time.Second, "checks after the rotation", func() bool { return ok.Load() > before+100 })
	cancel()
	wg.Wait()
	if f := failed.Load(); f != 0 {
		t.Fatalf("%d of %d checks failed across the rotation; first: %v", f, f+ok.Load(), firstErr.Load())
	}
	t.Logf("%d checks, none failed, across the rotation", ok.Load())
}
