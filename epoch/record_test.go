package epoch

import (
	"errors"
	"strings"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []record{
		{Kind: Join, Name: "n1", Addr: "10.0.0.1:7946", RaftID: 1 << 63, Group: 42},
		{Kind: Join, Name: "n2", Addr: "n2:1", RaftID: 7},
		{Kind: Leave, Name: "n3", RaftID: 9},
		{Kind: Dead, Name: "n4", RaftID: 1},
	} {
		got, err := decodeRecord(r.encode())
		if err != nil || got != r {
			t.Errorf("decode(encode(%+v)) = %+v, %v", r, got, err)
		}
	}
}

func TestDecodeRecordRejects(t *testing.T) {
	good := record{Kind: Join, Name: "n1", Addr: "a:1", RaftID: 5}.encode()
	long := record{Kind: Join, Name: strings.Repeat("x", maxString+1), Addr: "a:1", RaftID: 5}.encode()
	for _, tc := range []struct {
		name, field string
		b           []byte
	}{
		{"empty", "version", nil},
		{"version", "version", append([]byte{2}, good[1:]...)},
		{"kind", "kind", append([]byte{1, 9}, good[2:]...)},
		{"zero raft ID", "raftID", record{Kind: Dead, Name: "n1"}.encode()},
		{"truncated", "addr", good[:len(good)-1]},
		{"trailing", "end", append(good, 0)},
		{"empty name", "name", record{Kind: Dead, RaftID: 3}.encode()},
		{"long name", "name", long},
		{"join without addr", "addr", record{Kind: Join, Name: "n1", RaftID: 3}.encode()},
		{"dead with group", "kind", record{Kind: Dead, Name: "n1", RaftID: 3, Group: 4}.encode()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeRecord(tc.b)
			if !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), tc.field+":") {
				t.Fatalf("decode = %v, want ErrBadRecord naming %s", err, tc.field)
			}
		})
	}
}

// FuzzDecodeRecord: records are a file format once a data directory keeps
// the log. Decoding never panics, and what decodes encodes back to the
// same bytes.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(record{Kind: Join, Name: "n1", Addr: "10.0.0.1:7946", RaftID: 1, Group: 2}.encode())
	f.Add(record{Kind: Dead, Name: "n2", RaftID: 1 << 40}.encode())
	f.Add([]byte{1, 2, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			return
		}
		if got := string(r.encode()); got != string(b) {
			t.Fatalf("decode(%x) = %+v, which encodes as %x", b, r, got)
		}
	})
}
