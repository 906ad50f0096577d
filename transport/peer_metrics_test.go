package transport

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

func TestPeerMetricsRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	pm, err := NewPeerMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewPeerMetrics(reg); err == nil {
		t.Error("registering twice succeeded")
	}
	fake := newFakePeer(t, store.Config{})
	m, _ := startPeerServerWith(t, "owner", fake, pm) // the server side records on pm too
	c := newTestPeerClient(t, PeerClientConfig{Metrics: pm})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	items := []limiter.Forwarded{{Hash: 1, Limit: tbLimit(5), Cost: 1}, {Hash: 2, Limit: tbLimit(5), Cost: 1}}
	for range 3 {
		if err := c.Check(ctx, m, 0, items, make([]limiter.Answer, 2)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Check(ctx, ring.Member{Name: "gone", GRPCAddr: closedAddr(t)}, 0, items, make([]limiter.Answer, 2)); err == nil {
		t.Fatal("check to a closed port succeeded")
	}
	got := metricValues(t, reg)
	want := map[string]float64{
		"sluice_peer_rpcs_total{Check}":              4,
		"sluice_peer_rpc_errors_total{Check}":        1,
		"sluice_peer_forwarded_items_total":          8,
		"sluice_peer_batch_items":                    4,
		"sluice_peer_rpcs_total{Acquire}":            0,
		"sluice_peer_handoff_refused_total":          0,
		"sluice_peer_rpc_errors_total{Handoff}":      0,
		"sluice_peer_served_duration_seconds{Check}": 3,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if s := pm.Snapshot(); s != (PeerStats{CheckRPCs: 4, ForwardedItems: 8}) {
		t.Errorf("snapshot %+v", s)
	}
}

// metricValues gathers reg into name{label values...} -> value, for
// counters and gauges, and the sample count of histograms.
func metricValues(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range mt.GetLabel() {
				key += "{" + l.GetValue() + "}"
			}
			switch {
			case mt.GetCounter() != nil:
				got[key] = mt.GetCounter().GetValue()
			case mt.GetGauge() != nil:
				got[key] = mt.GetGauge().GetValue()
			case mt.GetHistogram() != nil:
				got[key] = float64(mt.GetHistogram().GetSampleCount())
			}
		}
	}
	return got
}

// peerRPCs is the number of peer RPCs sent and failed, all methods.
func peerRPCs(vals map[string]float64) (sent, failed float64) {
	for _, m := range peerMethods {
		sent += vals["sluice_peer_rpcs_total{"+m+"}"]
		failed += vals["sluice_peer_rpc_errors_total{"+m+"}"]
	}
	return sent, failed
}
