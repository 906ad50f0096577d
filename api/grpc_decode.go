package api

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/durationpb"

	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// streamRequest is a CheckStream message decoded into memory it keeps
// between messages (pooled per server: request, releaseRequest), so that
// a message of items seen before allocates nothing: each item's limit,
// its period, its spec and its cost live in a slot of the request, and a
// key, policy or time zone equal to the one its slot decoded last is
// that string again. The wire codec (internal/wire) calls ResetVT and
// UnmarshalVT, which shadow the embedded message's; the message decoded
// is the same as the generated decoder's.
type streamRequest struct {
	sluicev1.CheckStreamRequest
	slots []*itemSlot
	ptrs  []*sluicev1.CheckItem // the items: &slots[i].item
}

// itemSlot is the memory of one item of a streamRequest.
type itemSlot struct {
	item   sluicev1.CheckItem
	limit  sluicev1.Limit
	spec   sluicev1.CheckItem_Limit
	policy sluicev1.CheckItem_Policy
	period durationpb.Duration
	cost   int64
	// The strings last decoded, reused while the bytes are equal.
	key, policyName, timezone string
}

// maxPooledRequest is the most item slots of a request kept in the pool.
const maxPooledRequest = 64

// request returns an empty request from the server's pool.
func (s *rateLimiterServer) request() *streamRequest {
	r, _ := s.requests.Get().(*streamRequest)
	if r == nil {
		r = new(streamRequest)
	}
	return r
}

// releaseRequest returns a decided request to the pool.
func (s *rateLimiterServer) releaseRequest(r *streamRequest) {
	if len(r.slots) > maxPooledRequest {
		return
	}
	r.ResetVT()
	s.requests.Put(r)
}

// ResetVT empties the message, keeping its slots.
func (r *streamRequest) ResetVT() {
	for _, it := range r.Items {
		it.Reset() // pin no sub-messages of a fallback decode
	}
	r.CheckStreamRequest.Reset()
}

// UnmarshalVT decodes data into the reset message r. A message the fast
// path does not take (an unknown field, a field repeated where the
// generated decoder would merge, malformed bytes) is decoded by the
// generated decoder, which also makes its errors.
func (r *streamRequest) UnmarshalVT(data []byte) error {
	if r.decode(data) {
		return nil
	}
	r.ResetVT()
	return r.CheckStreamRequest.UnmarshalVT(data)
}

// decode is the fast path: false if it does not take data.
func (r *streamRequest) decode(b []byte) bool {
	n := 0
	for len(b) > 0 {
		num, typ, k := protowire.ConsumeTag(b)
		if k < 0 {
			return false
		}
		b = b[k:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, k := protowire.ConsumeVarint(b)
			if k < 0 {
				return false
			}
			r.Id, b = v, b[k:]
		case num == 2 && typ == protowire.BytesType:
			v, k := protowire.ConsumeBytes(b)
			if k < 0 {
				return false
			}
			b = b[k:]
			if n == len(r.slots) {
				r.slots = append(r.slots, new(itemSlot))
				r.ptrs = append(r.ptrs, &r.slots[n].item)
			}
			if !r.slots[n].decode(v) {
				return false
			}
			n++
		default:
			return false
		}
	}
	r.Items = r.ptrs[:n]
	return true
}

// decode decodes one item into its slot: false if it does not take b.
func (sl *itemSlot) decode(b []byte) bool {
	it := &sl.item
	it.Reset()
	for len(b) > 0 {
		num, typ, k := protowire.ConsumeTag(b)
		if k < 0 {
			return false
		}
		b = b[k:]
		switch typ {
		case protowire.BytesType:
			v, k := protowire.ConsumeBytes(b)
			if k < 0 {
				return false
			}
			b = b[k:]
			switch {
			case num == 1:
				it.Key = reuse(&sl.key, v)
			case num == 2 && it.Spec == nil: // a second limit merges: the fallback's
				sl.limit.Reset()
				if !sl.decodeLimit(v) {
					return false
				}
				sl.spec.Limit = &sl.limit
				it.Spec = &sl.spec
			case num == 3 && it.Spec == nil:
				sl.policy.Policy = reuse(&sl.policyName, v)
				it.Spec = &sl.policy
			default:
				return false
			}
		case protowire.VarintType:
			v, k := protowire.ConsumeVarint(b)
			if k < 0 {
				return false
			}
			b = b[k:]
			switch num {
			case 4:
				sl.cost = int64(v)
				it.Cost = &sl.cost
			case 5:
				it.UpTo = v != 0
			default:
				return false
			}
		default:
			return false
		}
	}
	return true
}

// decodeLimit decodes the reset sl.limit: false if it does not take b.
func (sl *itemSlot) decodeLimit(b []byte) bool {
	l := &sl.limit
	for len(b) > 0 {
		num, typ, k := protowire.ConsumeTag(b)
		if k < 0 {
			return false
		}
		b = b[k:]
		if typ == protowire.BytesType {
			v, k := protowire.ConsumeBytes(b)
			if k < 0 {
				return false
			}
			b = b[k:]
			switch {
			case num == 3 && l.Period == nil: // a second period merges: the fallback's
				sl.period.Reset()
				if !decodeDuration(&sl.period, v) {
					return false
				}
				l.Period = &sl.period
			case num == 7:
				l.Timezone = reuse(&sl.timezone, v)
			default:
				return false
			}
			continue
		}
		if typ != protowire.VarintType {
			return false
		}
		v, k := protowire.ConsumeVarint(b)
		if k < 0 {
			return false
		}
		b = b[k:]
		switch num {
		case 1:
			l.Algorithm = sluicev1.Algorithm(int32(v))
		case 2:
			l.Limit = int64(v)
		case 4:
			l.Burst = int64(v)
		case 5:
			l.FailureMode = sluicev1.FailureMode(int32(v))
		case 6:
			l.Calendar = sluicev1.Calendar(int32(v))
		default:
			return false
		}
	}
	return true
}

// decodeDuration decodes the reset d: false if it does not take b.
func decodeDuration(d *durationpb.Duration, b []byte) bool {
	for len(b) > 0 {
		num, typ, k := protowire.ConsumeTag(b)
		if k < 0 || typ != protowire.VarintType {
			return false
		}
		b = b[k:]
		v, k := protowire.ConsumeVarint(b)
		if k < 0 {
			return false
		}
		b = b[k:]
		switch num {
		case 1:
			d.Seconds = int64(v)
		case 2:
			d.Nanos = int32(v)
		default:
			return false
		}
	}
	return true
}

// reuse returns *last if it equals b, else b as a new string, kept in
// *last.
func reuse(last *string, b []byte) string {
	if string(b) != *last {
		*last = string(b)
	}
	return *last
}
