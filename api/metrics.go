package api

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/internal/wire"
)

// Metrics are the transport's Prometheus metrics: a latency histogram per
// API and method. No per-key labels.
type Metrics struct {
	latency *prometheus.HistogramVec
	panics  *prometheus.CounterVec
}

// NewMetrics registers the transport metrics on reg; a nil reg keeps them
// unregistered (they still work).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "sluice",
		Name:      "request_duration_seconds",
		Help:      "Latency of API calls by transport (grpc, http) and method.",
		Buckets:   []float64{25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 100e-3, 1},
	}, []string{"transport", "method"}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice",
			Name:      "panics_total",
			Help:      "Panics recovered in gRPC handlers and stream goroutines, answered INTERNAL, by full method name.",
		}, []string{"method"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.latency, m.panics} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// Recovery returns the panic recovery of a node's gRPC servers: it logs
// to log (nil: slog.Default()) and counts in sluice_panics_total{method}.
func (m *Metrics) Recovery(log *slog.Logger) *wire.Recovery {
	return &wire.Recovery{Logger: log, Count: func(method string) { m.panics.WithLabelValues(method).Inc() }}
}

// observer returns the histogram child for one transport and method, so the
// hot path does no label lookup.
func (m *Metrics) observer(transport, method string) prometheus.Observer {
	return m.latency.WithLabelValues(transport, method)
}

// since records the time elapsed from start on o.
func since(o prometheus.Observer, start time.Time) {
	o.Observe(time.Since(start).Seconds())
}
