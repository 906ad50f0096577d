package node

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/internal/logcap"
	"github.com/sluice-rl/sluice/internal/wire"
)

// The defaults of the caps (Bounds): those of internal/wire.
const (
	DefaultMaxConns           = wire.DefaultMaxConns
	DefaultMaxStreamsPerConn  = wire.DefaultMaxStreamsPerConn
	DefaultMaxInflightPerConn = wire.DefaultMaxInflightPerConn
	DefaultMaxInflight        = wire.DefaultMaxInflight
	DefaultShedMemoryShare    = wire.DefaultShedShare
)

// limits are the node's caps against exhaustion (docs/limits.md): one
// wire.Limits per listener, and one memory shedder for all.
type limits struct {
	shed               *wire.Shedder
	public, peer, http *wire.Limits
}

// newLimits builds the caps of Bounds b; refusals count in
// sluice_refused_total{port,reason} and log (capped, logcap) once a
// second per reason.
func newLimits(b Bounds, reg prometheus.Registerer, log *slog.Logger) (*limits, error) {
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_refused_total",
		Help: "Connections and messages refused by the node's caps, by port (grpc, peer, http) and reason (connections, connection_inflight, node_inflight, memory)."},
		[]string{"port", "reason"})
	if err := reg.Register(refused); err != nil {
		return nil, err
	}
	shed, err := wire.NewShedder(wire.ShedConfig{Share: b.ShedMemoryShare})
	if err != nil {
		return nil, err
	}
	l := &limits{shed: shed}
	mk := func(port string) (*wire.Limits, error) {
		return wire.NewLimits(wire.LimitsConfig{MaxConns: b.MaxConns, MaxStreamsPerConn: b.MaxStreamsPerConn,
			MaxInflightPerConn: b.MaxInflightPerConn, MaxInflight: b.MaxInflight, Shed: shed,
			Refused: func(reason string) {
				refused.WithLabelValues(port, reason).Inc()
				log.Warn("refused: "+port+" "+reason, "port", port, "reason", reason, logcap.Refusal, true)
			}})
	}
	for _, p := range []struct {
		name string
		to   **wire.Limits
	}{{"grpc", &l.public}, {"peer", &l.peer}, {"http", &l.http}} {
		if *p.to, err = mk(p.name); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// cappedLogger wraps log's handler in the caps of internal/logcap: a line
// a second per reason at WARN and above, and of refusals, every record
// counted in reg.
func cappedLogger(log *slog.Logger, reg prometheus.Registerer) (*slog.Logger, error) {
	h, err := logcap.New(log.Handler(), logcap.Config{Registerer: reg})
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	return slog.New(h), nil
}

// close stops the pools' idle workers.
func (l *limits) close() {
	if l == nil {
		return
	}
	l.public.Close()
	l.peer.Close()
	l.http.Close()
}

// listeners wraps the node's listeners with their connection caps.
func (l *limits) listeners(grpcLn, peerLn, httpLn net.Listener) (net.Listener, net.Listener, net.Listener) {
	return l.public.Listener(grpcLn), l.peer.Listener(peerLn), l.http.Listener(httpLn)
}

// run reads the memory for the shedder until ctx ends.
func (l *limits) run(ctx context.Context) { l.shed.Run(ctx) }

// shedHTTP answers 503 with Retry-After while memory is over its
// threshold, but for the probes and metrics, which must go on answering.
func (l *limits) shedHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l.shed.Over() {
			switch r.URL.Path {
			case "/healthz", "/readyz", "/metrics":
			default:
				l.http.Config().Refused(wire.RefusedMemory)
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"error":"node memory above its shedding threshold; retry later"}` + "\n"))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
