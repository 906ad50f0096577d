// Package client is the Go client of Sluice's sluice.v1 gRPC API, used by
// services and by the sluice CLI: Check, Usage, Acquire and Release over one
// or more node addresses.
//
//	c, err := client.New(client.Config{Addrs: []string{"sluice:8081"}})
//	res, err := c.Check(ctx, client.Item{Key: "user:42", Limit: client.Limit{Limit: 100, Period: time.Minute}})
//	if !res[0].Allowed { /* 429, Retry-After: res[0].RetryAfter */ }
package client
