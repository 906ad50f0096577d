package cluster

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// MuteGossip is a fault for tests: while on, this node sends no gossip
// packets (UDP), so it answers no probe (memberlist's or this package's)
// and its own probes get no answer, while memberlist's TCP streams
// (push/pull, the fallback ping of a failed probe) still pass. The others'
// memberlist therefore keeps it alive (it answers the TCP fallback ping),
// but this package's probes go unanswered and they report it Suspect (see the package documentation,
// "Suspicion"), until MuteGossip(false). Production code never calls it.
func (c *Cluster) MuteGossip(on bool) { c.transport.muted.Store(on) }

// muteTransport is memberlist's own NetTransport with the switch of
// MuteGossip: while muted, packets are dropped instead of sent. Streams
// are untouched.
type muteTransport struct {
	*memberlist.NetTransport
	muted atomic.Bool

	// A node alone's refusal of every stream and packet (refusals.go).
	alone bool
	stop  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
}

var _ memberlist.NodeAwareTransport = (*muteTransport)(nil)

// newMuteTransport binds the gossip port as memberlist does when it is
// given no transport: with a few retries when the port is chosen by the
// kernel (UDP and TCP must both get it), writing the port bound into
// mc.BindPort and mc.AdvertisePort, and sets mc.Transport.
func newMuteTransport(mc *memberlist.Config) (*muteTransport, error) {
	nc := &memberlist.NetTransportConfig{
		BindAddrs: []string{mc.BindAddr},
		BindPort:  mc.BindPort,
		Logger:    mc.Logger,
	}
	tries := 1
	if mc.BindPort == 0 {
		tries = 10
	}
	var (
		nt  *memberlist.NetTransport
		err error
	)
	for range tries {
		if nt, err = memberlist.NewNetTransport(nc); err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("bind: %w", err)
	}
	if mc.BindPort == 0 {
		mc.BindPort = nt.GetAutoBindPort()
		mc.AdvertisePort = mc.BindPort
	}
	t := &muteTransport{NetTransport: nt}
	mc.Transport = t
	return t, nil
}

// WriteTo sends a packet unless muted.
func (t *muteTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if t.muted.Load() {
		return time.Now(), nil
	}
	return t.NetTransport.WriteTo(b, addr)
}

// WriteToAddress sends a packet unless muted.
func (t *muteTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if t.muted.Load() {
		return time.Now(), nil
	}
	return t.NetTransport.WriteToAddress(b, a)
}
