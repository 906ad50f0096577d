package api

import (
	"reflect"
	"strings"
	"testing"
)

// The fast path takes the common shapes, and gives what the full decoder
// gives; every other body falls back to the full decoder.
func TestDecodeCheckFast(t *testing.T) {
	for _, body := range []string{
		`{"checks":[{"key":"user:42","limit":100,"period":"1m"}]}`,
		` { "checks" : [ { "key" : "k" , "policy" : "api" } ] } ` + "\n",
		`{"checks":[{"key":"a","limit":5,"period":"1s","burst":10,"cost":0,"algorithm":"sliding_window","failure_mode":"deny"},{"key":"b","policy":"p","cost":-3}]}`,
		`{"checks":[{"key":"k","limit":9223372036854775807,"period":"7d","calendar":"week","timezone":"Europe/Paris"}]}`,
		`{"checks":[{"key":"k","limit":-0,"period":"1h30m"},{"key":"","policy":"x"},{"key":"k","policy":"x"},{"key":"k","policy":"y"}]}`,
	} {
		got, ok := decodeCheckFast([]byte(body), nil)
		if !ok {
			t.Errorf("%s: not taken by the fast path", body)
			continue
		}
		want, _, herr := decodeCheckFull([]byte(body))
		if herr != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: fast %+v, full %+v (%v)", body, got, want, herr)
		}
	}
	for _, body := range []string{
		``, `{}`, `{"checks":[]}`, `{"checks":null}`, `{"checks":[{}]}`, `[]`,
		`{"checks":[{"key":"k","limit":1,"period":"1s"}],"checks":[]}`, // a second member
		`{"checks":[{"key":"k","limit":1,"period":"1s"}]} x`,           // trailing data
		`{"checks":[{"key":"k","limit":1,"period":"1s"}]`,              // cut short
		`{"checks":[{"Key":"k","limit":1,"period":"1s"}]}`,             // names match case-insensitively
		`{"checks":[{"key":"k","key":"j","policy":"p"}]}`,              // repeated
		`{"checks":[{"key":"k\u0041","policy":"p"}]}`,                  // an escape
		`{"checks":[{"key":"é","policy":"p"}]}`,                        // non-ASCII
		`{"checks":[{"key":"k","limit":1.0,"period":"1s"}]}`,
		`{"checks":[{"key":"k","limit":1e2,"period":"1s"}]}`,
		`{"checks":[{"key":"k","limit":01,"period":"1s"}]}`,
		`{"checks":[{"key":"k","limit":-,"period":"1s"}]}`,
		`{"checks":[{"key":"k","limit":9223372036854775808,"period":"1s"}]}`,
		`{"checks":[{"key":"k","limit":-9223372036854775808,"period":"1s"}]}`,
		`{"checks":[{"key":"k","limit":"5","period":"1s"}]}`,
		`{"checks":[{"key":"k","limit":null,"period":"1s"}]}`,
		`{"checks":[{"key":"k","limit":1,"period":"1s","extra":1}]}`,
		`{"checks":[{"key":"k","limit":1,"period":"soon"}]}`,                                          // toRequest refuses it
		`{"checks":[{"key":"k","policy":"p","limit":1}]}`,                                             // toRequest refuses it
		`{"checks":[` + strings.Repeat(`{"key":"k","policy":"p"},`, 4) + `{"key":"k","policy":"p"}]}`, // 5 items
		"\ufeff" + `{"checks":[{"key":"k","policy":"p"}]}`,
	} {
		if reqs, ok := decodeCheckFast([]byte(body), nil); ok {
			t.Errorf("%s: taken by the fast path: %+v", body, reqs)
		}
	}
}

// A one-item body is decoded in a few allocations (encoding/json: some 20).
func TestDecodeCheckFastAllocs(t *testing.T) {
	body := []byte(`{"checks":[{"key":"user:42","limit":100,"period":"1m"}]}`)
	if n := testing.AllocsPerRun(100, func() {
		if _, herr := decodeCheckBody(body); herr != nil {
			t.Fatal(herr)
		}
	}); n > 5 {
		t.Errorf("decodeCheckBody: %v allocations, want at most 5", n)
	}
}

// Whatever body the fast path takes, the full decoder takes the same way,
// whatever the pooled memory decoded before.
func FuzzDecodeCheckFast(f *testing.F) {
	f.Add([]byte(`{"checks":[{"key":"user:42","limit":100,"period":"1m"}]}`))
	f.Add([]byte(`{"checks":[{"key":"a","limit":-5,"period":"1s","burst":10,"cost":0,"algorithm":"sliding_window","failure_mode":"deny"},{"key":"b","policy":"p"}]}`))
	f.Add([]byte(`{"checks":[{"key":"k","limit":5,"period":"1d","calendar":"month","timezone":"UTC"}]}`))
	full := []byte(`{"checks":[{"key":"a","limit":5,"period":"1s","burst":9,"cost":2,"algorithm":"fixed_window",` +
		`"failure_mode":"deny","calendar":"day","timezone":"UTC"},{"key":"b","policy":"p","cost":1}]}`)
	f.Fuzz(func(t *testing.T, data []byte) {
		// Into pooled memory that decoded another body before, and again.
		m := new(checkMemory)
		if _, ok := decodeCheckFast(full, m); !ok {
			t.Fatal("the fast path refuses the full body")
		}
		for range 2 {
			got, ok := decodeCheckFast(data, m)
			if !ok {
				return
			}
			want, _, herr := decodeCheckFull(data)
			if herr != nil {
				t.Fatalf("the fast path took %q, the full decoder refuses it: %v", data, herr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%q: fast %+v, full %+v", data, got, want)
			}
		}
	})
}
