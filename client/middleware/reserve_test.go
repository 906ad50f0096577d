package middleware_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/client/middleware"
)

// A rule with an Estimate reserves it before the handler and settles the
// cost the handler reports after it: 20 of 30 leaves 80 of 100; 130 goes into
// debt and the next request is a 429 with Retry-After; a request whose
// handler reports nothing keeps its estimate; a request denied by another
// rule gives its reservation back.
func TestHTTPReportCost(t *testing.T) {
	c := newClient(t)
	tpm := client.Limit{Limit: 100, Period: time.Hour} // 36s a token: no refill to speak of during the test
	limit, err := middleware.NewHTTP(middleware.HTTPConfig{
		Client: c, FailMode: middleware.FailClosed,
		Rules: []middleware.HTTPRule{
			{Name: "tokens", Key: middleware.Header("X-Tenant"), Limit: tpm, Estimate: 30},
			{Name: "calls", Key: middleware.Header("X-Calls"), Limit: client.Limit{Limit: 1, Period: time.Hour}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("X-Used"); v != "" {
			n, _ := strconv.ParseInt(v, 10, 64)
			if !middleware.ReportCost(r.Context(), n) {
				t.Error("ReportCost under a reserving rule: false")
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
	tenant := "t-" + t.Name()
	do := func(used, calls string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/v1/chat", nil)
		r.Header.Set("X-Tenant", tenant)
		if used != "" {
			r.Header.Set("X-Used", used)
		}
		if calls != "" {
			r.Header.Set("X-Calls", calls)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	remaining := func() int64 {
		u, err := c.Usage(context.Background(), "tokens:"+tenant, "", tpm)
		if err != nil {
			t.Fatal(err)
		}
		return u.Remaining
	}
	if w := do("20", ""); w.Code != http.StatusOK || remaining() != 80 {
		t.Fatalf("reserve 30, report 20: %d, %d left, want 200 and 80", w.Code, remaining())
	}
	if w := do("", ""); w.Code != http.StatusOK || remaining() != 50 {
		t.Fatalf("no report: %d, %d left, want 200 and 50 (the estimate stands)", w.Code, remaining())
	}
	// Another rule denies: the reservation is given back.
	do("0", "c-"+t.Name()) // spends the one call, no tokens
	before := remaining()
	if w := do("", "c-"+t.Name()); w.Code != http.StatusTooManyRequests || remaining() != before {
		t.Fatalf("denied by the other rule: %d, %d left, want 429 and %d", w.Code, remaining(), before)
	}
	if w := do("130", ""); w.Code != http.StatusOK || remaining() != 0 {
		t.Fatalf("report 130 of 30: %d, %d left, want 200 and 0 (in debt)", w.Code, remaining())
	}
	w := do("1", "")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Fatalf("in debt: %d Retry-After %q, want 429 with Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
	if middleware.ReportCost(context.Background(), 1) {
		t.Error("ReportCost outside the middleware: true")
	}
}

func TestHTTPEstimateConfig(t *testing.T) {
	_, err := middleware.NewHTTP(middleware.HTTPConfig{Client: newClient(t), FailMode: middleware.FailOpen,
		Rules: []middleware.HTTPRule{{Name: "x", Key: middleware.Header("X"), Limit: client.Limit{Limit: 1, Period: time.Second}, Estimate: -1}}})
	if err == nil || !strings.Contains(err.Error(), "Rules[0].Estimate") {
		t.Fatalf("negative estimate: %v, want an error naming Rules[0].Estimate", err)
	}
}
