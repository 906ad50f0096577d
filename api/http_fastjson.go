package api

import (
	"bytes"
	"slices"

	"github.com/sluice-rl/sluice/limiter"
)

// decodeCheckFast decodes the common shape of a POST /v1/check body in one
// pass without encoding/json, which allocates some 20 objects for one
// item: {"checks":[{...},...]}, each item's members named exactly as
// documented (lowercase, each once), string values of printable ASCII
// without escapes, integers of digits. On anything else, or an item that
// toRequest refuses, it reports false and decodeCheckBody's full decoder
// decides (with its errors): what the fast path accepts, the full decoder
// accepts the same way (FuzzDecodeCheckFast compares them).
//
// The items' values and requests are decoded into m (nil: new memory),
// whose strings are reused while the bytes are equal (see checkMemory).
func decodeCheckFast(data []byte, m *checkMemory) ([]limiter.Request, bool) {
	if m == nil {
		m = new(checkMemory)
	}
	p := fastJSON{b: data}
	if !p.lit('{') || !p.name("checks") || !p.lit(':') || !p.lit('[') {
		return nil, false
	}
	var items [4]checkItemJSON // longer bodies take the full decoder
	vals := &m.vals
	n := 0
	for {
		if n == len(items) {
			return nil, false
		}
		if !p.item(&items[n], &vals[n]) {
			return nil, false
		}
		n++
		if p.lit(',') {
			continue
		}
		if !p.lit(']') || !p.lit('}') || !p.end() {
			return nil, false
		}
		break
	}
	reqs := slices.Grow(m.reqs[:0], n)[:n]
	m.reqs = reqs
	for i := range n {
		if herr := items[i].toRequest(i, 1, &reqs[i]); herr != nil {
			return nil, false
		}
	}
	return reqs, true
}

// itemValues holds the values an item's pointers point to, and the strings
// its item decoded last, reused while the bytes are equal.
type itemValues struct {
	limit, burst, cost int64
	key, policy        string
	strs               [5]string // period, algorithm, failure_mode, calendar, timezone
}

// fastJSON is decodeCheckFast's reader of data from i.
type fastJSON struct {
	b []byte
	i int
}

func (p *fastJSON) ws() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

// lit reads c after white space.
func (p *fastJSON) lit(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (p *fastJSON) end() bool {
	p.ws()
	return p.i == len(p.b)
}

// str reads a string of printable ASCII without escapes and returns its
// bytes (a view of data).
func (p *fastJSON) str() ([]byte, bool) {
	if !p.lit('"') {
		return nil, false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return p.b[start : p.i-1], true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, false
		}
		p.i++
	}
	return nil, false
}

// name reads the member name want.
func (p *fastJSON) name(want string) bool {
	s, ok := p.str()
	return ok && string(s) == want
}

// int reads an integer: an optional minus, then 0 or digits without a
// leading 0, within int64.
func (p *fastJSON) int() (int64, bool) {
	p.ws()
	neg := p.i < len(p.b) && p.b[p.i] == '-'
	if neg {
		p.i++
	}
	start := p.i
	var v int64
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		d := int64(p.b[p.i] - '0')
		if v > (1<<63-1-d)/10 {
			return 0, false // beyond int64 (even -1<<63: the full decoder takes it)
		}
		v = v*10 + d
		p.i++
	}
	digits := p.i - start
	if digits == 0 || (digits > 1 && p.b[start] == '0') {
		return 0, false
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

// The members of an item, a bit each (a repeated one falls back).
const (
	memKey = 1 << iota
	memPolicy
	memLimit
	memPeriod
	memBurst
	memCost
	memAlgorithm
	memFailureMode
	memCalendar
	memTimezone
)

// item reads one {...} check into it; its values go to v.
func (p *fastJSON) item(it *checkItemJSON, v *itemValues) bool {
	if !p.lit('{') {
		return false
	}
	if p.lit('}') {
		return true // toRequest refuses it; the full decoder says so
	}
	seen := 0
	for {
		name, ok := p.str()
		if !ok || !p.lit(':') {
			return false
		}
		var bit int
		var ip **int64
		var iv *int64
		var sp **string
		var si int // sp's string in v.strs
		switch {
		case bytes.Equal(name, []byte("key")):
			bit = memKey
		case bytes.Equal(name, []byte("policy")):
			bit = memPolicy
		case bytes.Equal(name, []byte("limit")):
			bit, ip, iv = memLimit, &it.Limit, &v.limit
		case bytes.Equal(name, []byte("burst")):
			bit, ip, iv = memBurst, &it.Burst, &v.burst
		case bytes.Equal(name, []byte("cost")):
			bit, ip, iv = memCost, &it.Cost, &v.cost
		case bytes.Equal(name, []byte("period")):
			bit, sp, si = memPeriod, &it.Period, 0
		case bytes.Equal(name, []byte("algorithm")):
			bit, sp, si = memAlgorithm, &it.Algorithm, 1
		case bytes.Equal(name, []byte("failure_mode")):
			bit, sp, si = memFailureMode, &it.FailureMode, 2
		case bytes.Equal(name, []byte("calendar")):
			bit, sp, si = memCalendar, &it.Calendar, 3
		case bytes.Equal(name, []byte("timezone")):
			bit, sp, si = memTimezone, &it.Timezone, 4
		default:
			return false
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		if ip != nil {
			n, ok := p.int()
			if !ok {
				return false
			}
			*iv, *ip = n, iv
		} else {
			s, ok := p.str()
			if !ok {
				return false
			}
			switch {
			case bit == memKey:
				it.Key.s = reuse(&v.key, s)
			case bit == memPolicy:
				it.Policy = reuse(&v.policy, s)
			default:
				reuse(&v.strs[si], s)
				*sp = &v.strs[si]
			}
		}
		if p.lit(',') {
			continue
		}
		return p.lit('}')
	}
}
