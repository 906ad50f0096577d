package cluster

import (
	"errors"
	"fmt"
	"net/netip"
)

// The probe messages of this node's suspicion (suspicion.go), sent as
// memberlist user messages:
//
//	magic (1 byte) | kind (1 byte: 'p' ping, 'a' ack) |
//	address length (1 byte) | address |
//	target length (1 byte) | target's NodeName | sender's NodeName
//
// A ping carries the "ip:port" the pinger gossips at, where the ack goes
// (a member that has not heard of the pinger yet can still answer), and
// the name of the member it is meant for, which answers only if it is
// that member (another node now at that address does not); an ack
// carries neither.
const (
	probeMagic byte = 0xA7
	probePing  byte = 'p'
	probeAck   byte = 'a'
	// probeMaxName bounds the sender's name in a probe message.
	probeMaxName = 512
)

// errProbe is wrapped by the errors of decodeProbe.
var errProbe = errors.New("cluster: bad probe message")

// probeMsg is a decoded probe message.
type probeMsg struct {
	kind byte   // probePing or probeAck
	addr string // a ping's return address, "ip:port"; empty for an ack
	to   string // the NodeName a ping is meant for; empty for an ack
	from string // the sender's NodeName
}

// encodeProbe returns the probe message m; m.addr and m.to must be
// shorter than 256 bytes (an "ip:port" is; a longer name is truncated,
// and its node then answers no ping: such names are not used).
func encodeProbe(m probeMsg) []byte {
	to := m.to[:min(len(m.to), 255)]
	b := make([]byte, 0, 4+len(m.addr)+len(to)+len(m.from))
	b = append(b, probeMagic, m.kind, byte(len(m.addr)))
	b = append(b, m.addr...)
	b = append(b, byte(len(to)))
	b = append(b, to...)
	return append(b, m.from...)
}

// decodeProbe decodes a probe message, checking every field.
func decodeProbe(b []byte) (probeMsg, error) {
	switch {
	case len(b) < 3:
		return probeMsg{}, fmt.Errorf("%w: %d bytes, want at least 3", errProbe, len(b))
	case b[0] != probeMagic:
		return probeMsg{}, fmt.Errorf("%w: magic %#x, want %#x", errProbe, b[0], probeMagic)
	case b[1] != probePing && b[1] != probeAck:
		return probeMsg{}, fmt.Errorf("%w: kind %q, want 'p' or 'a'", errProbe, b[1])
	}
	m := probeMsg{kind: b[1]}
	n := int(b[2])
	rest := b[3:]
	if n > len(rest) {
		return probeMsg{}, fmt.Errorf("%w: address of %d bytes in a message of %d", errProbe, n, len(b))
	}
	m.addr, rest = string(rest[:n]), rest[n:]
	if len(rest) == 0 {
		return probeMsg{}, fmt.Errorf("%w: no target length", errProbe)
	}
	n, rest = int(rest[0]), rest[1:]
	if n > len(rest) {
		return probeMsg{}, fmt.Errorf("%w: target of %d bytes in a message of %d", errProbe, n, len(b))
	}
	m.to, rest = string(rest[:n]), rest[n:]
	switch {
	case m.kind == probePing:
		ap, err := netip.ParseAddrPort(m.addr)
		if err != nil || ap.Port() == 0 || ap.Addr().Zone() != "" || ap.String() != m.addr {
			return probeMsg{}, fmt.Errorf("%w: address %q, want ip:port", errProbe, m.addr)
		}
		if m.to == "" {
			return probeMsg{}, fmt.Errorf("%w: a ping without a target", errProbe)
		}
	case m.addr != "" || m.to != "":
		return probeMsg{}, fmt.Errorf("%w: an ack with an address or a target", errProbe)
	}
	switch {
	case len(rest) == 0:
		return probeMsg{}, fmt.Errorf("%w: no sender name", errProbe)
	case len(rest) > probeMaxName:
		return probeMsg{}, fmt.Errorf("%w: name of %d bytes, want at most %d", errProbe, len(rest), probeMaxName)
	}
	m.from = string(rest)
	return m, nil
}
