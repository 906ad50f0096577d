package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

func reserveItem(key string, l *sluicev1.Limit, estimate int64) *sluicev1.ReserveItem {
	return &sluicev1.ReserveItem{Key: key, Spec: &sluicev1.ReserveItem_Limit{Limit: l}, Estimate: estimate}
}

func settleItem(key string, l *sluicev1.Limit, id string, actual int64) *sluicev1.SettleItem {
	return &sluicev1.SettleItem{Key: key, Spec: &sluicev1.SettleItem_Limit{Limit: l}, ReservationId: id, Actual: actual}
}

// Every bad input of Reserve and Settle is an InvalidArgument naming the
// field; an unknown reservation is NOT_FOUND naming it.
func TestGRPCReserveBadInput(t *testing.T) {
	c := startGRPCClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tb := lim(sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET, 100, time.Minute, 0)
	log := lim(sluicev1.Algorithm_ALGORITHM_SLIDING_LOG, 100, time.Minute, 0)
	for _, tc := range []struct {
		name  string
		req   *sluicev1.ReserveRequest
		field string
	}{
		{"no items", &sluicev1.ReserveRequest{}, "items"},
		{"zero estimate", &sluicev1.ReserveRequest{Items: []*sluicev1.ReserveItem{reserveItem("k", tb, 0)}}, "items[0].estimate"},
		{"negative estimate", &sluicev1.ReserveRequest{Items: []*sluicev1.ReserveItem{reserveItem("k", tb, 1), reserveItem("k", tb, -5)}}, "items[1].estimate"},
		{"estimate above capacity", &sluicev1.ReserveRequest{Items: []*sluicev1.ReserveItem{reserveItem("k", tb, 101)}}, "items[0].estimate"},
		{"ttl above the cap", &sluicev1.ReserveRequest{Items: []*sluicev1.ReserveItem{reserveItem("k", tb, 1)}, Ttl: durationpb.New(2 * time.Hour)}, "ttl"},
		{"negative ttl", &sluicev1.ReserveRequest{Items: []*sluicev1.ReserveItem{reserveItem("k", tb, 1)}, Ttl: durationpb.New(-time.Second)}, "ttl"},
		{"sliding log", &sluicev1.ReserveRequest{Items: []*sluicev1.ReserveItem{reserveItem("k", log, 1)}}, "items[0].limit.algorithm"},
		{"no key", &sluicev1.ReserveRequest{Items: []*sluicev1.ReserveItem{reserveItem("", tb, 1)}}, "items[0].key"},
	} {
		t.Run("reserve "+tc.name, func(t *testing.T) {
			_, err := c.Reserve(ctx, tc.req)
			wantInvalid(t, err, tc.field)
		})
	}
	// Nothing was taken by the refused calls.
	res, err := c.Reserve(ctx, &sluicev1.ReserveRequest{Items: []*sluicev1.ReserveItem{reserveItem("k", tb, 100)}})
	if err != nil || !res.GetAllowed() || res.GetResults()[0].GetReservationId() == "" {
		t.Fatalf("reserve the whole bucket after the refused calls: %+v %v", res, err)
	}
	id := res.GetResults()[0].GetReservationId()
	for _, tc := range []struct {
		name  string
		req   *sluicev1.SettleRequest
		field string
	}{
		{"no items", &sluicev1.SettleRequest{}, "items"},
		{"missing id", &sluicev1.SettleRequest{Items: []*sluicev1.SettleItem{settleItem("k", tb, "", 1)}}, "items[0].reservation_id"},
		{"malformed id", &sluicev1.SettleRequest{Items: []*sluicev1.SettleItem{settleItem("k", tb, "xyz", 1)}}, "items[0].reservation_id"},
		{"negative actual", &sluicev1.SettleRequest{Items: []*sluicev1.SettleItem{settleItem("k", tb, id, -1)}}, "items[0].actual"},
	} {
		t.Run("settle "+tc.name, func(t *testing.T) {
			_, err := c.Settle(ctx, tc.req)
			wantInvalid(t, err, tc.field)
		})
	}
	unknown := strings.Repeat("ab", 16)
	_, err = c.Settle(ctx, &sluicev1.SettleRequest{Items: []*sluicev1.SettleItem{settleItem("k", tb, id, 40), settleItem("k", tb, unknown, 1)}})
	if st := status.Convert(err); st.Code() != codes.NotFound || !strings.Contains(st.Message(), "items[1].reservation_id") || !strings.Contains(st.Message(), unknown) {
		t.Fatalf("unknown id: %v, want NotFound naming items[1].reservation_id and %s", err, unknown)
	}
	// The item before the unknown one was settled: settling it again is a no-op.
	again, err := c.Settle(ctx, &sluicev1.SettleRequest{Items: []*sluicev1.SettleItem{settleItem("k", tb, id, 40)}})
	if r := again.GetResults(); err != nil || len(r) != 1 || !r[0].GetAlreadySettled() || r[0].GetRefunded() != 60 || r[0].GetRemaining() != 60 {
		t.Fatalf("settle again: %+v %v, want already settled, 60 refunded, 60 left", again, err)
	}
}

// postJSON posts body to path on h and returns the status and the decoded
// answer.
func postJSON(t *testing.T, h http.Handler, path, body string) (int, map[string]any) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
	var out map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s %s: %d %q is not JSON", path, body, w.Code, w.Body)
	}
	return w.Code, out
}

// Every bad input of /v1/reserve and /v1/settle is a 400 naming the field.
func TestHTTPReserveBadInput(t *testing.T) {
	h := mustHandler(t, HTTPConfig{Checker: newTestLimiter(t, testPolicies)})
	const tb = `"key":"k","limit":100,"period":"1m"`
	for _, tc := range []struct {
		path, body, field string
	}{
		{"/v1/reserve", `{"items":[]}`, "items"},
		{"/v1/reserve", `{"items":[{` + tb + `}]}`, "items[0].estimate"},
		{"/v1/reserve", `{"items":[{` + tb + `,"estimate":0}]}`, "items[0].estimate"},
		{"/v1/reserve", `{"items":[{` + tb + `,"estimate":-1}]}`, "items[0].estimate"},
		{"/v1/reserve", `{"items":[{` + tb + `,"estimate":101}]}`, "items[0].estimate"},
		{"/v1/reserve", `{"items":[{` + tb + `,"estimate":1,"cost":1}]}`, "items[0].cost"},
		{"/v1/reserve", `{"items":[{` + tb + `,"estimate":1}],"ttl":"2h"}`, "ttl"},
		{"/v1/reserve", `{"items":[{` + tb + `,"estimate":1}],"ttl":"soon"}`, "ttl"},
		{"/v1/reserve", `{"items":[{` + tb + `,"estimate":1}],"ttl":"0s"}`, "ttl"},
		{"/v1/reserve", `{"items":[{"key":"k","limit":5,"period":"1m","algorithm":"concurrency","estimate":1}]}`, "items[0].algorithm"},
		{"/v1/reserve", `{"items":[{"key":"k","estimate":1}]}`, "items[0].policy"},
		{"/v1/reserve", `{"items":[{` + tb + `,"estimate":"x"}]}`, "items[0].estimate"},
		{"/v1/reserve", `{"items":[{` + tb + `,"estimate":1}],"extra":1}`, "extra"},
		{"/v1/reserve", `{"items":`, "body"},
		{"/v1/settle", `{"items":[{` + tb + `,"actual":1}]}`, "items[0].reservation_id"},
		{"/v1/settle", `{"items":[{` + tb + `,"reservation_id":"","actual":1}]}`, "items[0].reservation_id"},
		{"/v1/settle", `{"items":[{` + tb + `,"reservation_id":"abc","actual":1}]}`, "items[0].reservation_id"},
		{"/v1/settle", `{"items":[{` + tb + `,"reservation_id":"` + strings.Repeat("ab", 16) + `"}]}`, "items[0].actual"},
		{"/v1/settle", `{"items":[{` + tb + `,"reservation_id":"` + strings.Repeat("ab", 16) + `","actual":-1}]}`, "items[0].actual"},
	} {
		t.Run(tc.path+" "+tc.body, func(t *testing.T) {
			code, out := postJSON(t, h, tc.path, tc.body)
			if code != http.StatusBadRequest || out["field"] != tc.field || !strings.HasPrefix(out["error"].(string), tc.field+": ") {
				t.Errorf("%d %v, want 400 naming %s", code, out, tc.field)
			}
		})
	}
	code, out := postJSON(t, h, "/v1/settle", `{"items":[{`+tb+`,"reservation_id":"`+strings.Repeat("ab", 16)+`","actual":1}]}`)
	if code != http.StatusNotFound || out["field"] != "items[0].reservation_id" || !strings.Contains(out["error"].(string), strings.Repeat("ab", 16)) {
		t.Errorf("unknown id: %d %v, want 404 naming items[0].reservation_id and the id", code, out)
	}
}

// FuzzHTTPReserve: any body to /v1/reserve or /v1/settle is answered in
// JSON with a documented status; a 400 names the field; never a panic.
func FuzzHTTPReserve(f *testing.F) {
	f.Add(true, []byte(`{"items":[{"key":"k","limit":100,"period":"1m","estimate":60}],"ttl":"30s"}`))
	f.Add(true, []byte(`{"items":[{"key":"k","policy":"api","estimate":10},{"key":"k","policy":"login","estimate":1}]}`))
	f.Add(false, []byte(`{"items":[{"key":"k","limit":100,"period":"1m","reservation_id":"abababababababababababababababab","actual":40}]}`))
	f.Add(false, []byte(`{"items":[{"key":"k","policy":"api","reservation_id":"zz","actual":-1}]}`))
	f.Add(true, []byte(`{"items":[{"key":"k","limit":5,"calendar":"month","timezone":"Europe/Berlin","estimate":5}],"ttl":"-1s"}`))
	f.Add(true, []byte(`{"items":[{"key":"k","limit":5,"period":"1m","algorithm":"sliding_log","estimate":1}]}`))
	f.Add(false, []byte(`{"items":[{"key":"k","limit":5,"period":"1m","reservation_id":"abababababababababababababababab","actual":9223372036854775807}]}`))
	h, err := NewHTTPHandler(HTTPConfig{Checker: fuzzLimiter(f), MaxBodyBytes: 4096})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, reserve bool, body []byte) {
		path := "/v1/settle"
		if reserve {
			path = "/v1/reserve"
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
		switch w.Code {
		case http.StatusOK, http.StatusTooManyRequests, http.StatusNotFound, http.StatusServiceUnavailable, http.StatusRequestEntityTooLarge:
		case http.StatusBadRequest:
			var e errorJSON
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Field == "" || !strings.HasPrefix(e.Error, e.Field+": ") {
				t.Fatalf("%s %q: 400 %s does not name a field", path, body, w.Body)
			}
		default:
			t.Fatalf("%s %q: status %d %s", path, body, w.Code, w.Body)
		}
		if !json.Valid(w.Body.Bytes()) {
			t.Fatalf("%s %q: %s is not JSON", path, body, w.Body)
		}
	})
}
