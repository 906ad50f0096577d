package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/limiter"
)

// FuzzAdminBody checks that the admin routes' body decoder never panics,
// that every error is a 400 naming a field, and that a decoded request
// carries no cost and a remaining only for a reset, never below -1
// (limiter.ResetFull, for full).
func FuzzAdminBody(f *testing.F) {
	f.Add([]byte(`{"key":"user:42","policy":"api"}`), true)
	f.Add([]byte(`{"key":"user:42","limit":10,"period":"1h","remaining":3}`), true)
	f.Add([]byte(`{"key":"user:42","limit":10,"period":"1h","remaining":3}`), false)
	f.Add([]byte(`{"key":"k","policy":"p","limit":1,"cost":2,"remaining":-4}`), true)
	f.Add([]byte(`{"key":"k","calendar":"month","timezone":"Europe/Berlin","limit":5,"REMAINING":1,"remaining":2}`), true)
	f.Add([]byte(`{"key":"k","remaining":"all"} {}`), true)
	f.Fuzz(func(t *testing.T, data []byte, reset bool) {
		req, remaining, herr := decodeAdminBody(data, reset)
		if herr != nil {
			if herr.status != http.StatusBadRequest || herr.field == "" || !strings.HasPrefix(herr.msg, herr.field+": ") {
				t.Fatalf("bad error %+v", herr)
			}
			return
		}
		if req.Cost != 0 || req.UpTo {
			t.Fatalf("decoded a cost %d (up_to %t)", req.Cost, req.UpTo)
		}
		if remaining < limiter.ResetFull || (!reset && remaining != limiter.ResetFull) {
			t.Fatalf("remaining %d (reset %t)", remaining, reset)
		}
		if req.Policy != "" && (req.Limit.Limit != 0 || req.Limit.Period != 0 || req.Timezone != "") {
			t.Fatalf("a policy %q and an inline limit %+v", req.Policy, req.Limit)
		}
	})
}
