package transport

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// PeerMetrics are the peer client's Prometheus metrics, with atomic
// counters alongside for cheap reads (Snapshot). No per-key labels; the
// only per-peer label is the node name of the circuit gauge (bounded by the
// cluster size; a forgotten peer's series is removed).
type PeerMetrics struct {
	rpcs          [numPeerMethods]prometheus.Counter
	errs          [numPeerMethods]prometheus.Counter
	items         prometheus.Counter
	batch         prometheus.Histogram
	refusedC      prometheus.Counter
	served        *prometheus.HistogramVec // server side, by Server
	circuitOpen   *prometheus.GaugeVec     // by peer name
	circuitOpened prometheus.Counter
	raftSentC     prometheus.Counter
	raftDroppedC  [numRaftDrops]prometheus.Counter // by raftDropReasons

	checkRPCs, forwardedItems, raftSent, raftDropped atomic.Uint64
}

// PeerStats is a snapshot of PeerMetrics.
type PeerStats struct {
	// CheckRPCs is the number of Check RPCs sent.
	CheckRPCs uint64
	// ForwardedItems is the number of items sent in Check RPCs;
	// ForwardedItems/CheckRPCs is the mean batch size.
	ForwardedItems uint64
	// RaftSent is the number of Raft messages a RaftSender sent (handed
	// to their peer's stream), RaftDropped the number it dropped, for
	// any reason.
	RaftSent, RaftDropped uint64
}

// NewPeerMetrics registers the peer client metrics on reg; a nil reg keeps
// them unregistered (they still work):
//
//	sluice_peer_rpcs_total{method}        RPCs sent, by method
//	sluice_peer_rpc_errors_total{method}  RPCs that failed, by method
//	sluice_peer_forwarded_items_total     items sent in Check RPCs
//	sluice_peer_batch_items               items per Check RPC (histogram)
//	sluice_peer_handoff_refused_total     states a new owner refused (full)
//	sluice_peer_served_duration_seconds{method}  latency of the peer calls
//	                                      this node serves, when passed to
//	                                      Server (ServerConfig.Metrics)
//	sluice_peer_circuit_open{peer}        1 while the circuit breaker of
//	                                      peer (a node name) is open or
//	                                      half-open, 0 while closed
//	sluice_peer_circuit_opened_total      times a closed circuit opened (a
//	                                      failed probe reopening it is not
//	                                      counted)
//	sluice_peer_raft_messages_sent_total  Raft messages sent (RaftSender)
//	sluice_peer_raft_dropped_total{reason}  Raft messages dropped, by reason:
//	                                      queue_full (the peer's queue was
//	                                      full), unreachable (the peer
//	                                      could not be reached or its stream
//	                                      failed), invalid (empty or over
//	                                      MaxRaftMessageBytes), closed (sent
//	                                      after Close); Raft retransmits
func NewPeerMetrics(reg prometheus.Registerer) (*PeerMetrics, error) {
	rpcs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sluice", Name: "peer_rpcs_total",
		Help: "RPCs sent to other nodes, by method.",
	}, []string{"method"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sluice", Name: "peer_rpc_errors_total",
		Help: "RPCs to other nodes that failed, by method.",
	}, []string{"method"})
	m := &PeerMetrics{
		items: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Name: "peer_forwarded_items_total",
			Help: "Items forwarded to their owners in Check RPCs.",
		}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "sluice", Name: "peer_batch_items",
			Help:    "Items per forwarded Check RPC.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14), // 1 .. 8192
		}),
		refusedC: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Name: "peer_handoff_refused_total",
			Help: "Handed-off states the new owner refused because its store was full.",
		}),
		served: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "sluice", Name: "peer_served_duration_seconds",
			Help:    "Latency of the peer calls this node serves, by method.",
			Buckets: []float64{25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 100e-3, 1},
		}, []string{"method"}),
		circuitOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "sluice", Name: "peer_circuit_open",
			Help: "1 while the circuit breaker of a peer is open (calls to it fail at once), 0 while closed.",
		}, []string{"peer"}),
		circuitOpened: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Name: "peer_circuit_opened_total",
			Help: "Times the circuit breaker of a peer opened after consecutive failed RPCs.",
		}),
	}
	m.raftSentC = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "sluice", Name: "peer_raft_messages_sent_total",
		Help: "Raft messages sent to other nodes.",
	})
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sluice", Name: "peer_raft_dropped_total",
		Help: "Raft messages dropped before reaching their peer, by reason (Raft retransmits).",
	}, []string{"reason"})
	for i, method := range peerMethods {
		m.rpcs[i] = rpcs.WithLabelValues(method)
		m.errs[i] = errs.WithLabelValues(method)
	}
	for i, reason := range raftDropReasons {
		m.raftDroppedC[i] = dropped.WithLabelValues(reason)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{rpcs, errs, m.items, m.batch, m.refusedC, m.served, m.circuitOpen, m.circuitOpened,
			m.raftSentC, dropped} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// Snapshot returns the current counts (zero for a nil m).
func (m *PeerMetrics) Snapshot() PeerStats {
	if m == nil {
		return PeerStats{}
	}
	return PeerStats{CheckRPCs: m.checkRPCs.Load(), ForwardedItems: m.forwardedItems.Load(),
		RaftSent: m.raftSent.Load(), RaftDropped: m.raftDropped.Load()}
}

func (m *PeerMetrics) peerServedObserver(method string) prometheus.Observer {
	if m == nil {
		return nopObserver{}
	}
	return m.served.WithLabelValues(method)
}

func (m *PeerMetrics) rpc(method int) {
	if m != nil {
		m.rpcs[method].Inc()
	}
}

func (m *PeerMetrics) rpcError(method int) {
	if m != nil {
		m.errs[method].Inc()
	}
}

func (m *PeerMetrics) checkRPC(items int) {
	if m == nil {
		return
	}
	m.rpcs[peerCheck].Inc()
	m.items.Add(float64(items))
	m.batch.Observe(float64(items))
	m.checkRPCs.Add(1)
	m.forwardedItems.Add(uint64(items))
}

// forgetPeer removes the circuit gauge of the peer named name.
func (m *PeerMetrics) forgetPeer(name string) {
	if m != nil {
		m.circuitOpen.DeleteLabelValues(name)
	}
}

func (m *PeerMetrics) refused(n int32) {
	if m != nil && n > 0 {
		m.refusedC.Add(float64(n))
	}
}

// The reasons a RaftSender drops a message, indexing raftDroppedC.
const (
	raftDropQueueFull = iota
	raftDropUnreachable
	raftDropInvalid
	raftDropClosed
	numRaftDrops
)

var raftDropReasons = [numRaftDrops]string{"queue_full", "unreachable", "invalid", "closed"}

func (m *PeerMetrics) raftSentN(n int) {
	if m != nil && n > 0 {
		m.raftSentC.Add(float64(n))
		m.raftSent.Add(uint64(n))
	}
}

func (m *PeerMetrics) raftDrop(reason, n int) {
	if m != nil && n > 0 {
		m.raftDroppedC[reason].Add(float64(n))
		m.raftDropped.Add(uint64(n))
	}
}

// nopObserver records nothing: the observer of a nil *PeerMetrics.
type nopObserver struct{}

func (nopObserver) Observe(float64) {}
