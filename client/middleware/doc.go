// Package middleware rate-limits a service's own requests with Sluice:
// net/http middleware (NewHTTP) and gRPC server interceptors (NewGRPC).
//
// Each request is checked against a set of rules in one Check call: a rule
// is a limit (an inline client.Limit or a policy configured on the nodes)
// and a key function that extracts the request's key, from a header, the
// client IP (behind trusted proxies, see ClientIP and GRPCClientIP), the
// route pattern, gRPC metadata, the peer or the method, or several joined.
// Layered limits are several rules: per IP and per API key, say, and the
// request is denied when any of them denies it.
//
//	c, err := client.New(client.Config{Addrs: []string{"sluice:8081"}})
//	ip, err := middleware.ClientIP(middleware.ClientIPConfig{TrustedProxies: []string{"10.0.0.0/8"}})
//	limit, err := middleware.NewHTTP(middleware.HTTPConfig{
//		Client:   c,
//		FailMode: middleware.FailOpen,
//		Rules: []middleware.HTTPRule{
//			{Name: "ip", Key: ip, Limit: client.Limit{Limit: 100, Period: time.Minute}},
//			{Name: "apikey", Key: middleware.Header("X-API-Key"), Policy: "per-key"}, // in the nodes' --config
//		},
//	})
//	http.ListenAndServe(":9090", limit(mux)) // the service's own port; Sluice's are 8080-8082
//
// A denied HTTP request is answered 429 with Retry-After and the RateLimit
// headers Sluice's HTTP API sends; a denied gRPC call fails with
// ResourceExhausted and RetryInfo and QuotaFailure details. What happens
// when Sluice cannot answer is each service's explicit choice, FailOpen or
// FailClosed: the constructors refuse a configuration without one. Without
// an OnError, each request Sluice did not decide is logged, at most a line a
// second per reason. A rule the nodes refuse (a policy they do not have:
// ErrRuleRejected) fails its requests in either mode (HTTP 500, gRPC
// Internal) and is logged at ERROR: it is never let through in silence.
package middleware
