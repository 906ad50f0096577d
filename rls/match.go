package rls

import "strings"

// Entry is one key/value of a request's descriptor. Envoy's
// *RateLimitDescriptor_Entry satisfies it, so a caller passes the request's
// entries as they are.
type Entry interface {
	GetKey() string
	GetValue() string
}

// KV is an Entry made of two strings.
type KV struct{ Key, Value string }

// GetKey returns the key.
func (e KV) GetKey() string { return e.Key }

// GetValue returns the value.
func (e KV) GetValue() string { return e.Value }

// Match is the rule that applies to one descriptor of a request.
type Match struct {
	// Rule is the rule; nil when no rule applies (no match, or a match at
	// another depth, or a descriptor without rate_limit: "whitelisted").
	Rule *Rule
	// StatsKey is the reference's metric key for this descriptor
	// ("domain.key_value.key2"): the rule's FullKey, or with the request's
	// values where detailed_metric or value_to_metric ask for them, or the
	// wildcard pattern where share_threshold does.
	StatsKey string
	// Shared, when not nil, holds for each entry the wildcard pattern
	// (e.g. "files/*") that replaces the entry's value in the counter key
	// because of share_threshold; "" keeps the value.
	Shared []string
}

// Lookup finds the rule for a descriptor of domain, as the reference's
// GetLimit does, and reports whether the domain is known (an unknown
// domain matches nothing). A request's limit override is the caller's
// business (see OverrideKey): the reference applies it, for a known domain,
// without looking the descriptor up.
//
// The rules: each entry is looked up at its depth, first as key_value,
// then against the wildcards of that level in file order ("key_prefix*"
// matches values that start with prefix), then as the key alone (the
// key-only default); the descriptor matches a rule only when the rule is
// at the depth of its last entry. A level with no children ends the walk.
func Lookup[E Entry](c *Config, domain string, entries []E) (Match, bool) {
	root := c.domains[domain]
	if root == nil {
		return Match{}, false
	}
	var (
		rule   *Rule
		shared map[int]string // share_threshold patterns by entry index
		// mk is the value_to_metric key, on the stack while it is short:
		// it usually equals the rule's FullKey and is then not kept.
		mbuf [192]byte
		mk   = append(mbuf[:0], domain...)
		kbuf [128]byte
	)
	children := root.children
	prev := root
	for i, entry := range entries {
		key, value := entry.GetKey(), entry.GetValue()
		kv := append(append(append(kbuf[:0], key...), '_'), value...)
		next := children[string(kv)] // no copy for a map index
		wildcardKey := ""
		if next == nil && len(prev.wildcardKeys) > 0 {
			finalKey := key + "_" + value
			for _, wk := range prev.wildcardKeys {
				if strings.HasPrefix(finalKey, strings.TrimSuffix(wk, "*")) {
					next, wildcardKey = children[wk], wk
					break
				}
			}
		}
		matchedValue := next != nil
		if next == nil {
			next = children[key]
		}
		if wildcardKey != "" && next != nil && next.shareThreshold && next.wildcardPattern != "" {
			if shared == nil {
				shared = make(map[int]string)
			}
			shared[i] = strings.TrimPrefix(next.wildcardPattern, key+"_")
		}

		mk = append(mk, '.')
		mk = append(mk, key...)
		if next != nil {
			var v string
			switch {
			case wildcardKey != "" && shared[i] != "":
				v = shared[i]
			case wildcardKey != "" && next.valueToMetric:
				v = value
			case wildcardKey != "":
				v = strings.TrimPrefix(wildcardKey, key+"_")
			case matchedValue:
				v = value
			case next.valueToMetric:
				v = value
			}
			if v != "" {
				mk = append(mk, '_')
				mk = append(mk, v...)
			}
		}

		if next != nil && next.rule != nil && i == len(entries)-1 {
			rule = next.rule
		}
		if next == nil || len(next.children) == 0 {
			break
		}
		children, prev = next.children, next
	}
	if rule == nil {
		return Match{}, true
	}
	m := Match{Rule: rule, StatsKey: rule.FullKey}
	if len(shared) > 0 {
		m.Shared = make([]string, len(entries))
		for i, p := range shared {
			m.Shared[i] = p
		}
	}
	switch {
	case rule.DetailedMetric && m.Shared != nil:
		var b strings.Builder
		b.WriteString(domain)
		for i, e := range entries {
			b.WriteByte('.')
			b.WriteString(e.GetKey())
			if p := m.Shared[i]; p != "" {
				b.WriteByte('_')
				b.WriteString(p)
			} else if v := e.GetValue(); v != "" {
				b.WriteByte('_')
				b.WriteString(v)
			}
		}
		m.StatsKey = b.String()
	case rule.DetailedMetric:
		var b strings.Builder
		b.WriteString(domain)
		for _, e := range entries {
			b.WriteByte('.')
			b.WriteString(e.GetKey())
			b.WriteByte('_')
			b.WriteString(e.GetValue())
		}
		m.StatsKey = b.String()
	case string(mk) != rule.FullKey: // compared without a copy
		m.StatsKey = string(mk)
	}
	return m, true
}

// CounterKey is the reference's cache key of a matched descriptor without
// its time suffix: "domain_key1_value1_key2_value2_", each value replaced
// by its share_threshold pattern where shared names one. Descriptors with
// the same counter key (in any request) count against one counter.
func CounterKey[E Entry](domain string, entries []E, shared []string) string {
	n := len(domain) + 1
	for _, e := range entries {
		n += len(e.GetKey()) + len(e.GetValue()) + 2
	}
	return string(AppendCounterKey(make([]byte, 0, n), domain, entries, shared))
}

// AppendCounterKey appends CounterKey(domain, entries, shared) to dst.
func AppendCounterKey[E Entry](dst []byte, domain string, entries []E, shared []string) []byte {
	dst = append(dst, domain...)
	dst = append(dst, '_')
	for i, e := range entries {
		dst = append(dst, e.GetKey()...)
		dst = append(dst, '_')
		v := e.GetValue()
		if i < len(shared) && shared[i] != "" {
			v = shared[i]
		}
		dst = append(dst, v...)
		dst = append(dst, '_')
	}
	return dst
}

// OverrideKey is the reference's metric key of a descriptor that carries
// its own limit: "domain.key1_value1.key2" (a value only where there is
// one).
func OverrideKey[E Entry](domain string, entries []E) string {
	var b strings.Builder
	b.WriteString(domain)
	b.WriteByte('.')
	for i, e := range entries {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(e.GetKey())
		if v := e.GetValue(); v != "" {
			b.WriteByte('_')
			b.WriteString(v)
		}
	}
	return b.String()
}
