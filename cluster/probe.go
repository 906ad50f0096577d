package cluster

import (
	"errors"
	"fmt"
)

// The probe messages of this node's suspicion (suspicion.go), sent as
// memberlist user messages: a magic byte, the kind, and the sender's
// NodeName.
const (
	probeMagic byte = 0xA7
	probePing  byte = 'p'
	probeAck   byte = 'a'
	// probeMaxName bounds the sender's name in a probe message.
	probeMaxName = 512
)

// errProbe is wrapped by the errors of decodeProbe.
var errProbe = errors.New("cluster: bad probe message")

// encodeProbe returns the probe message of kind sent by node name.
func encodeProbe(kind byte, name string) []byte {
	b := make([]byte, 0, 2+len(name))
	b = append(b, probeMagic, kind)
	return append(b, name...)
}

// decodeProbe decodes a probe message: its kind (probePing or probeAck)
// and its sender's name.
func decodeProbe(b []byte) (kind byte, from string, err error) {
	switch {
	case len(b) < 3:
		return 0, "", fmt.Errorf("%w: %d bytes, want at least 3", errProbe, len(b))
	case b[0] != probeMagic:
		return 0, "", fmt.Errorf("%w: magic %#x, want %#x", errProbe, b[0], probeMagic)
	case b[1] != probePing && b[1] != probeAck:
		return 0, "", fmt.Errorf("%w: kind %q, want 'p' or 'a'", errProbe, b[1])
	case len(b)-2 > probeMaxName:
		return 0, "", fmt.Errorf("%w: name of %d bytes, want at most %d", errProbe, len(b)-2, probeMaxName)
	}
	return b[1], string(b[2:]), nil
}
