package api

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Every /v1/check answer has a Content-Length and is not chunked: a small
// one from net/http (writeJSON leaves it out, see autoContentLength), a
// large one from writeJSON.
func TestHTTPContentLength(t *testing.T) {
	srv := newTestServer(t, serverOpts{})
	items := func(n int) string {
		s := make([]string, n)
		for i := range s {
			s[i] = fmt.Sprintf(`{"key":"k%d","limit":100,"period":"1m"}`, i)
		}
		return `{"checks":[` + strings.Join(s, ",") + `]}`
	}
	for _, n := range []int{1, 40} {
		resp, err := srv.Client().Post(srv.URL+"/v1/check", "application/json", strings.NewReader(items(n)))
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%d items: %s %s %v", n, resp.Status, body, err)
		}
		if big := len(body) >= autoContentLength; big != (n > 1) {
			t.Fatalf("%d items: a body of %d bytes: the test does not cover both sizes", n, len(body))
		}
		if resp.ContentLength != int64(len(body)) || len(resp.TransferEncoding) != 0 {
			t.Errorf("%d items: Content-Length %d, Transfer-Encoding %v, for a body of %d bytes",
				n, resp.ContentLength, resp.TransferEncoding, len(body))
		}
	}
}

// A check's pooled memory carries nothing into the next: a one-item check
// after a larger one, with other fields, answers for its own item.
func TestHTTPCheckMemoryReuse(t *testing.T) {
	srv := newTestServer(t, serverOpts{})
	first := post(t, srv.Server, `{"checks":[{"key":"a","limit":1,"period":"1h","cost":1,`+
		`"algorithm":"fixed_window","failure_mode":"deny"},{"key":"b","limit":5,"period":"1s"},{"key":"c","limit":9,"period":"1s","cost":9}]}`)
	if got := decode[checkResponseJSON](t, first).Results; len(got) != 3 {
		t.Fatalf("first check: %s", first)
	}
	for range 3 {
		a := post(t, srv.Server, `{"checks":[{"key":"d","limit":7,"period":"1m"}]}`)
		got := decode[checkResponseJSON](t, a).Results
		if len(got) != 1 || got[0].Limit != 7 || !got[0].Allowed {
			t.Fatalf("second check: %s", a)
		}
	}
	got := decode[checkResponseJSON](t, post(t, srv.Server, `{"checks":[{"key":"a","limit":1,"period":"1h","algorithm":"fixed_window"}]}`)).Results
	if len(got) != 1 || got[0].Allowed || got[0].Remaining != 0 {
		t.Fatalf("a's window is spent: %+v", got)
	}
}
