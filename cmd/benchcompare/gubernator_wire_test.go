package main

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// TestGubRequestWire decodes the encoded GetRateLimitsReq field by field:
// one RateLimitReq per key with gubernator.proto's field numbers.
func TestGubRequestWire(t *testing.T) {
	q := &gubRequest{keys: []string{"a", "key-2"}, limit: 100, durationMs: 1000}
	b := q.appendTo(nil)
	if len(b) != q.size() {
		t.Fatalf("encoded %d bytes, size says %d", len(b), q.size())
	}
	var got []map[protowire.Number]any
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != gubFieldRequests || typ != protowire.BytesType {
			t.Errorf("top-level field %d type %d, want requests (1, bytes)", num, typ)
		}
		item := map[protowire.Number]any{}
		got = append(got, item)
		return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
			if typ == protowire.VarintType {
				x, _ := protowire.ConsumeVarint(v)
				item[num] = int64(x)
			} else {
				item[num] = string(v)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d requests, want 2", len(got))
	}
	for i, k := range q.keys {
		want := map[protowire.Number]any{gubFieldName: gubName, gubFieldUniqueKey: k, gubFieldHits: int64(1),
			gubFieldLimit: int64(100), gubFieldDuration: int64(1000)}
		for f, v := range want {
			if got[i][f] != v {
				t.Errorf("request %d field %d = %v, want %v", i, f, got[i][f], v)
			}
		}
		if len(got[i]) != len(want) {
			t.Errorf("request %d has fields %v, want exactly %v", i, got[i], want)
		}
	}
}

// TestGubResponseWire reads statuses and errors from a GetRateLimitsResp
// built field by field, with fields the reader skips (limit, remaining,
// reset_time, metadata).
func TestGubResponseWire(t *testing.T) {
	resp := func(status uint64, errText string) []byte {
		var b []byte
		if status != 0 {
			b = protowire.AppendTag(b, gubFieldStatus, protowire.VarintType)
			b = protowire.AppendVarint(b, status)
		}
		b = protowire.AppendTag(b, 2, protowire.VarintType) // limit
		b = protowire.AppendVarint(b, 100)
		b = protowire.AppendTag(b, 4, protowire.VarintType) // reset_time
		b = protowire.AppendVarint(b, 1796386904775)
		if errText != "" {
			b = protowire.AppendTag(b, gubFieldError, protowire.BytesType)
			b = protowire.AppendString(b, errText)
		}
		b = protowire.AppendTag(b, 6, protowire.BytesType) // metadata entry
		b = protowire.AppendBytes(b, []byte{0x0a, 0x01, 'o', 0x12, 0x01, 'x'})
		return b
	}
	var msg []byte
	for _, r := range [][]byte{resp(0, ""), resp(gubOverLimit, ""), resp(0, "boom")} {
		msg = protowire.AppendTag(msg, gubFieldResponses, protowire.BytesType)
		msg = protowire.AppendBytes(msg, r)
	}
	allowed := make([]bool, 3)
	p := &gubResponse{allowed: allowed}
	if err := p.decode(msg); err != nil {
		t.Fatal(err)
	}
	if p.n != 3 || p.err != "boom" {
		t.Fatalf("n=%d err=%q, want 3 and boom", p.n, p.err)
	}
	if want := []bool{true, false, false}; allowed[0] != want[0] || allowed[1] != want[1] || allowed[2] != want[2] {
		t.Fatalf("allowed %v, want %v", allowed, want)
	}
	if err := (&gubResponse{}).decode([]byte{0x0a, 0x05, 0x08}); err == nil {
		t.Fatal("a truncated response decoded without an error")
	}
}
