package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/policy"
)

// FuzzDecodeCheck checks that the body decoder never panics, that every
// error is a 400 naming a field, and that every decoded request is shaped
// as the limiter expects.
func FuzzDecodeCheck(f *testing.F) {
	f.Add([]byte(`{"checks":[{"key":"user:42","limit":100,"period":"1m","burst":100,"cost":1,"algorithm":"token_bucket","failure_mode":"local"}]}`))
	f.Add([]byte(`{"checks":[{"key":"k","policy":"login"},{"key":"k","limit":-1,"period":"7d","cost":0}]}`))
	f.Add([]byte(`{"checks":[{"key":"k","limit":"x","period":60,"foo":null}]} x`))
	f.Add([]byte(`{"checks":[{"key":"a","policy":"login","KEY":"b"}],"Checks":[]}`))
	f.Add([]byte(`{"checks":[{"key":"k","limit":5,"calendar":"week","timezone":"America/New_York","CALENDAR":"day"}]}`))
	f.Add([]byte(`{"checks":[{"\u006bey":"a","key":"b","\u212aey":"c"}]}`))
	f.Add([]byte(`{"checks":[{"key":"ip:1","limit":10,"period":"1h"},{"key":"user:43","policy":"api"}],"atomic":true,"ATOMIC":false}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		reqs, herr := decodeCheckBody(data)
		if herr != nil {
			if reqs != nil {
				t.Fatalf("requests and an error %v", herr)
			}
			if herr.status != http.StatusBadRequest || herr.field == "" || !strings.HasPrefix(herr.msg, herr.field+": ") {
				t.Fatalf("bad error %+v", herr)
			}
			return
		}
		if len(reqs) == 0 || len(reqs) > limiter.MaxItems {
			t.Fatalf("%d requests", len(reqs))
		}
		for i, r := range reqs {
			if r.Policy != "" {
				if r.Limit != (bucket.Limit{}) || r.FailureMode != policy.FailLocal || r.Timezone != "" {
					t.Fatalf("request %d names policy %q and carries a limit %+v", i, r.Policy, r.Limit)
				}
				continue
			}
			if r.Limit.Algorithm < bucket.TokenBucket || r.Limit.Algorithm > bucket.Concurrency {
				t.Fatalf("request %d: algorithm %d", i, r.Limit.Algorithm)
			}
			if r.Limit.Calendar > bucket.LastCalendar || r.Limit.Zone != nil {
				t.Fatalf("request %d: calendar %d, zone %v (the limiter loads Timezone)", i, r.Limit.Calendar, r.Limit.Zone)
			}
			if r.FailureMode > policy.FailAllow {
				t.Fatalf("request %d: failure mode %d", i, r.FailureMode)
			}
		}
	})
}
