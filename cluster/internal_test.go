package cluster

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/hashicorp/memberlist"
)

func TestMetaRoundTrip(t *testing.T) {
	m := NodeMeta{GRPCAddr: "10.0.0.7:9090", PeerAddr: "10.0.0.7:8082", Version: "v1.2.3", PolicyHash: "0123456789abcdef"}
	for _, leaving := range []bool{false, true} {
		b, err := m.encode(leaving)
		if err != nil {
			t.Fatal(err)
		}
		got, gotLeaving, err := decodeMeta(b)
		if err != nil || got != m || gotLeaving != leaving {
			t.Fatalf("decode(encode(%+v, %v)) = %+v, %v, %v", m, leaving, got, gotLeaving, err)
		}
	}
	if got, _, err := decodeMeta(nil); err != nil || got != (NodeMeta{}) {
		t.Fatalf("decode(nil) = %+v, %v", got, err)
	}
	// Newer versions may add keys.
	if got, _, err := decodeMeta([]byte(`{"g":"a:1","z":3}`)); err != nil || got.GRPCAddr != "a:1" {
		t.Fatalf("decode with unknown key = %+v, %v", got, err)
	}
	// Older versions advertise no policy hash.
	if got, _, err := decodeMeta([]byte(`{"g":"a:1","p":"a:2","v":"v0.9.0"}`)); err != nil ||
		got != (NodeMeta{GRPCAddr: "a:1", PeerAddr: "a:2", Version: "v0.9.0"}) {
		t.Fatalf("decode of a meta without a policy hash = %+v, %v", got, err)
	}
	if _, _, err := decodeMeta([]byte("\x00garbage")); err == nil {
		t.Fatal("decode(garbage) succeeded")
	}
	// The limit applies to the longest (leaving) form.
	edge := NodeMeta{Version: strings.Repeat("v", memberlist.MetaMaxSize-len(`{"v":"","l":true}`))}
	if errs := edge.validate(); len(errs) != 0 {
		t.Fatalf("meta of exactly %d bytes rejected: %v", memberlist.MetaMaxSize, errs)
	}
	edge.Version += "v"
	if errs := edge.validate(); len(errs) != 1 {
		t.Fatalf("meta over the limit: %v", errs)
	}
}

// The Raft advert (key "e") round-trips at full 64 bits, is absent for a
// node that advertises none (and ignored by older versions, which ignore
// unknown keys), and bad forms are refused.
func TestMetaRaft(t *testing.T) {
	m := NodeMeta{GRPCAddr: "10.0.0.7:9090", Raft: RaftMeta{ID: 1<<64 - 1, Group: 1<<63 + 1, Epoch: 7}}
	b, err := m.encode(false)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := decodeMeta(b); err != nil || got != m {
		t.Fatalf("decode(encode(%+v)) = %+v, %v", m, got, err)
	}
	if b, _ := (NodeMeta{GRPCAddr: "a:1"}).encode(false); strings.Contains(string(b), `"e"`) {
		t.Fatalf("a meta without a Raft advert encodes %s", b)
	}
	if got, _, err := decodeMeta([]byte(`{"g":"a:1","e":{}}`)); err != nil || got.Raft != (RaftMeta{}) {
		t.Fatalf("decode of an empty advert = %+v, %v", got, err)
	}
	for _, tc := range []struct{ name, meta string }{
		{"group without ID", `{"e":{"g":5}}`},
		{"epoch without ID", `{"e":{"n":5}}`},
		{"negative ID", `{"e":{"i":-1}}`},
		{"ID over 64 bits", `{"e":{"i":18446744073709551616}}`},
		{"fractional epoch", `{"e":{"i":1,"n":1.5}}`},
		{"ID as a string", `{"e":{"i":"1"}}`},
		{"advert not an object", `{"e":[1]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, leaving, err := decodeMeta([]byte(tc.meta))
			if err == nil || got != (NodeMeta{}) || leaving {
				t.Fatalf("decode(%s) = %+v, %v, %v; want an error", tc.meta, got, leaving, err)
			}
		})
	}
	errs := NodeMeta{Raft: RaftMeta{Group: 4}}.validate()
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "Meta.Raft.ID") {
		t.Fatalf("validate of an advert without an ID = %v, want one error naming Meta.Raft.ID", errs)
	}
}

func TestAddrString(t *testing.T) {
	for _, tt := range []struct {
		ip   net.IP
		want string
	}{
		{net.ParseIP("10.0.0.1"), "10.0.0.1:7946"}, // 16-byte form
		{net.ParseIP("10.0.0.1").To4(), "10.0.0.1:7946"},
		{net.ParseIP("::1"), "[::1]:7946"},
	} {
		if got := addrString(tt.ip, 7946); got != tt.want {
			t.Errorf("addrString(%v) = %q, want %q", tt.ip, got, tt.want)
		}
	}
}

func TestMemberlistLog(t *testing.T) {
	var buf bytes.Buffer
	l := newMemberlistLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), nil)
	l.Printf("[WARN] memberlist: Refuting a suspect message (from: %s)", "b")
	out := buf.String()
	for _, want := range []string{"level=DEBUG", `msg="Refuting a suspect message (from: b)"`, "memberlist_level=WARN"} {
		if !strings.Contains(out, want) {
			t.Errorf("log %q lacks %q", out, want)
		}
	}

	// Nothing is formatted when debug is off.
	buf.Reset()
	quiet := newMemberlistLogger(slog.New(slog.NewTextHandler(&buf, nil)), nil)
	quiet.Printf("[DEBUG] memberlist: noise")
	if buf.Len() != 0 {
		t.Fatalf("logged %q at info level", buf.String())
	}
}

// FuzzParseGossipKeys: any file contents give keys that memberlist accepts
// or a *KeyFileError, never a panic.
func FuzzParseGossipKeys(f *testing.F) {
	f.Add([]byte("AAAAAAAAAAAAAAAAAAAAAA==\n"))
	f.Add([]byte("# c\n\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\nAAAAAAAAAAAAAAAAAAAAAA==\n"))
	f.Add([]byte("AAAA\r\n"))
	f.Add([]byte("\x00\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, err := parseGossipKeys("f", b)
		if err != nil {
			var kfe *KeyFileError
			if !errors.As(err, &kfe) || kfe.Path != "f" {
				t.Fatalf("err = %v, want a *KeyFileError for f", err)
			}
			return
		}
		if len(keys) == 0 || len(keys) > MaxGossipKeys {
			t.Fatalf("%d keys", len(keys))
		}
		if _, err := memberlist.NewKeyring(keys[1:], keys[0]); err != nil {
			t.Fatalf("memberlist refuses the keys: %v", err)
		}
	})
}
