package policy

import (
	"fmt"
	"sort"
)

// Set is an immutable collection of named policies.
type Set struct {
	// AllowInline reports whether checks may carry inline limits instead
	// of naming a policy.
	AllowInline bool
	policies    map[string]Policy
}

// Empty returns a set with no policies that allows inline limits.
func Empty() *Set { return &Set{AllowInline: true} }

// NewSet builds a set from validated policies. Names must be unique.
func NewSet(allowInline bool, ps ...Policy) (*Set, error) {
	s := &Set{AllowInline: allowInline, policies: make(map[string]Policy, len(ps))}
	for _, p := range ps {
		if _, dup := s.policies[p.Name]; dup {
			return nil, fmt.Errorf("%w: policies.%s: defined twice", ErrInvalid, p.Name)
		}
		if err := p.Limit.Validate(); err != nil {
			return nil, fmt.Errorf("%w: policies.%s.%w", ErrInvalid, p.Name, err)
		}
		s.policies[p.Name] = p
	}
	return s, nil
}

// Lookup returns the policy called name.
func (s *Set) Lookup(name string) (Policy, bool) {
	p, ok := s.policies[name]
	return p, ok
}

// Names returns the policy names in order.
func (s *Set) Names() []string {
	out := make([]string, 0, len(s.policies))
	for n := range s.policies {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Len returns the number of policies.
func (s *Set) Len() int { return len(s.policies) }
