// Package client is the Go client of Sluice's sluice.v1 gRPC API, used by
// services and by the sluice CLI: Check, Usage, Acquire and Release over one
// or more node addresses.
//
//	c, err := client.New(client.Config{Addrs: []string{"sluice:8081"}})
//	res, err := c.Check(ctx, client.Item{Key: "user:42", Limit: client.Limit{Limit: 100, Period: time.Minute}})
//	if !res[0].Allowed { /* 429, Retry-After: res[0].RetryAfter */ }
//
// To rate-limit a service's own requests, package client/middleware wraps a
// Client as net/http middleware (middleware.NewHTTP: 429 with Retry-After
// and RateLimit headers) and gRPC server interceptors (middleware.NewGRPC:
// ResourceExhausted with RetryInfo), keyed by header, client IP behind
// trusted proxies, route, metadata, peer or method:
//
//	limit, err := middleware.NewHTTP(middleware.HTTPConfig{Client: c, FailMode: middleware.FailOpen,
//		Rules: []middleware.HTTPRule{{Name: "key", Key: middleware.Header("X-API-Key"), Limit: client.Limit{Limit: 100, Period: time.Minute}}}})
//	http.ListenAndServe(":8080", limit(mux))
package client
