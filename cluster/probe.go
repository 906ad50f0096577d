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
//	address length (1 byte) | address | sender's NodeName
//
// A ping carries the "ip:port" the pinger gossips at, where the ack goes
// (a member that has not heard of the pinger yet can still answer); an
// ack carries no address.
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
	from string // the sender's NodeName
}

// encodeProbe returns the probe message m; m.addr must be shorter than
// 256 bytes (an "ip:port" is).
func encodeProbe(m probeMsg) []byte {
	b := make([]byte, 0, 3+len(m.addr)+len(m.from))
	b = append(b, probeMagic, m.kind, byte(len(m.addr)))
	b = append(b, m.addr...)
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
	switch {
	case m.kind == probePing:
		ap, err := netip.ParseAddrPort(m.addr)
		if err != nil || ap.Port() == 0 || ap.Addr().Zone() != "" || ap.String() != m.addr {
			return probeMsg{}, fmt.Errorf("%w: address %q, want ip:port", errProbe, m.addr)
		}
	case n != 0:
		return probeMsg{}, fmt.Errorf("%w: an ack with an address", errProbe)
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
