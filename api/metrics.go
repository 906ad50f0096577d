package api

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the transport's Prometheus metrics: a latency histogram per
// API and method. No per-key labels.
type Metrics struct {
	latency *prometheus.HistogramVec
}

// NewMetrics registers the transport metrics on reg; a nil reg keeps them
// unregistered (they still work).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "sluice",
		Name:      "request_duration_seconds",
		Help:      "Latency of API calls by transport (grpc, http) and method.",
		Buckets:   []float64{25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 100e-3, 1},
	}, []string{"transport", "method"})}
	if reg != nil {
		if err := reg.Register(m.latency); err != nil {
			return nil, err
		}
	}
	return m, nil
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
