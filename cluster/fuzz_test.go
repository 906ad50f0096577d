package cluster

import (
	"testing"
)

// FuzzDecodeMeta: any node metadata gossiped by a member either decodes
// or is an error; never a panic. What decodes encodes back (in the form it
// came, leaving or not) to metadata that decodes to the same.
func FuzzDecodeMeta(f *testing.F) {
	for _, m := range []NodeMeta{{}, {GRPCAddr: "10.0.0.1:8081", Version: "v1.2.3"}, {GRPCAddr: "[::1]:1"},
		{GRPCAddr: "10.0.0.1:8081", PeerAddr: "10.0.0.1:8083", Version: "v1.2.3", PolicyHash: "0123456789abcdef"},
		{GRPCAddr: "10.0.0.1:8081", Version: "v0.1.0", Protocol: 1},
		{GRPCAddr: "10.0.0.1:8081", PeerAddr: "10.0.0.1:8083", Version: "v1.2.3", PolicyHash: "0123456789abcdef", RLSHash: "fedcba9876543210"},
		{GRPCAddr: "10.0.0.1:8081", Raft: RaftMeta{ID: 1<<64 - 1, Group: 1 << 63, Epoch: 12}}, {Raft: RaftMeta{ID: 3}}} {
		for _, leaving := range []bool{false, true} {
			b, err := m.encode(leaving)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add([]byte(`{"g":5}`))
	f.Add([]byte(`{"g":"a:1","x":{"y":[1,2]},"l":"yes"}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"g":"10.0.0.1:8081","v":"v1.0.0"}`)) // a node of a version without a policy hash
	f.Add([]byte(`{"h":7}`))
	f.Add([]byte(`{"w":-1}`))
	f.Add([]byte(`{"w":1e40}`))
	f.Add([]byte(`{"g":"10.0.0.1:8081","h":"0123456789abcdef"}`)) // a node of a version without an RLS hash
	f.Add([]byte(`{"r":["x"]}`))
	f.Add([]byte(`{"e":{"g":5}}`))                    // a group without an ID
	f.Add([]byte(`{"e":{"i":-1}}`))                   // a negative ID
	f.Add([]byte(`{"e":{"i":18446744073709551616}}`)) // over 64 bits
	f.Add([]byte(`{"e":[1,2,3]}`))
	f.Add([]byte(`{"e":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, leaving, err := decodeMeta(data)
		if err != nil {
			if m != (NodeMeta{}) || leaving {
				t.Fatalf("an error %v with metadata %+v, leaving %v", err, m, leaving)
			}
			return
		}
		b, err := m.encode(leaving)
		if err != nil {
			// Longer than memberlist's limit once re-encoded (escapes):
			// such metadata is never sent by a node.
			return
		}
		m2, leaving2, err := decodeMeta(b)
		if err != nil || m2 != m || leaving2 != leaving {
			t.Fatalf("round trip %+v/%v -> %q -> %+v/%v (%v)", m, leaving, b, m2, leaving2, err)
		}
	})
}

// FuzzDecodeProbe: any user message a member sends either decodes as a
// probe or is an error; never a panic. What decodes encodes back to the
// same bytes.
func FuzzDecodeProbe(f *testing.F) {
	f.Add(encodeProbe(probeMsg{kind: probePing, addr: "10.0.0.1:7946", to: "node-2", from: "node-1"}))
	f.Add(encodeProbe(probeMsg{kind: probePing, addr: "[fe80::1]:7946", to: "m", from: "n"}))
	f.Add(encodeProbe(probeMsg{kind: probeAck, from: "n"}))
	f.Add([]byte{probeMagic, 'x', 0, 0, 'y'})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeProbe(data)
		if err != nil {
			if m != (probeMsg{}) {
				t.Fatalf("an error %v with a message %+v", err, m)
			}
			return
		}
		if b := encodeProbe(m); string(b) != string(data) {
			t.Fatalf("round trip %q -> %+v -> %q", data, m, b)
		}
	})
}
