package wire

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// Bounds on the repeated fields of peer messages, checked by the codec on
// the encoded bytes before a message is decoded (Codec.Unmarshal), so that
// a message of many tiny items (an empty KeyState is 2 bytes on the wire
// and a few hundred in memory) is refused before anything is allocated
// for its items. The handlers check the same bounds again on the decoded
// message, naming the field with InvalidArgument.
const (
	// MaxHandoffStates is the most states in one Peer.Handoff request and
	// one Peer.Fetch response (transport.MaxHandoffStates).
	MaxHandoffStates = 4096
	// MaxPeerBatch is the most items in one peer Check request
	// (transport.MaxPeerBatch).
	MaxPeerBatch = 8192
)

// ErrTooManyItems is the error of a message refused by the codec because a
// repeated field has more items than its bound.
var ErrTooManyItems = errors.New("wire: too many items")

// countCap is a bound on a repeated field of a message: path is the field
// numbers from the top-level message down to the repeated field (all but
// the last are sub-messages).
type countCap struct {
	name string
	path []protowire.Number
	max  int
}

// capsOf returns the bounds that apply to v's encoding; nil if none.
func capsOf(v any) []countCap {
	switch v.(type) {
	case *sluicev1.HandoffRequest:
		return []countCap{{"states", []protowire.Number{2}, MaxHandoffStates}}
	case *sluicev1.FetchResponse:
		return []countCap{{"states", []protowire.Number{1}, MaxHandoffStates}}
	case *sluicev1.PeerCheckRequest:
		return []countCap{{"items", []protowire.Number{2}, MaxPeerBatch}}
	case *sluicev1.PeerCheckStreamRequest:
		return []countCap{{"request.items", []protowire.Number{2, 2}, MaxPeerBatch}}
	}
	return nil
}

// checkCounts refuses data if a field of caps has more items than its
// bound. Malformed data is left to the decoder.
func checkCounts(data []byte, caps []countCap) error {
	for _, c := range caps {
		if n := countAt(data, c.path, c.max); n > c.max {
			return fmt.Errorf("%w: %s: more than %d items", ErrTooManyItems, c.name, c.max)
		}
	}
	return nil
}

// countAt counts the occurrences of the field at path in data, stopping
// once it passes limit.
func countAt(data []byte, path []protowire.Number, limit int) int {
	n := 0
	for len(data) > 0 && n <= limit {
		num, typ, l := protowire.ConsumeTag(data)
		if l < 0 {
			return n
		}
		data = data[l:]
		m := protowire.ConsumeFieldValue(num, typ, data)
		if m < 0 {
			return n
		}
		if num == path[0] {
			if len(path) == 1 {
				n++
			} else if typ == protowire.BytesType {
				sub, _ := protowire.ConsumeBytes(data)
				n += countAt(sub, path[1:], limit-n)
			}
		}
		data = data[m:]
	}
	return n
}
