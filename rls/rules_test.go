package rls

import "testing"

// Rules counts the descriptors with a rate_limit at every level, the
// unlimited one included, and not those without (a whitelisted value).
func TestRules(t *testing.T) {
	c, err := Parse([]File{{Name: "a.yaml", Data: []byte(`domain: a
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: k
    value: free
  - key: u
    value: vip
    rate_limit: {unlimited: true}
  - key: t
    descriptors:
      - key: ip
        rate_limit: {unit: minute, requests_per_unit: 10}
`)}, {Name: "b.yaml", Data: []byte("domain: b\ndescriptors:\n  - key: x\n    rate_limit: {unit: hour, requests_per_unit: 5}\n")}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Rules(); got != 4 {
		t.Errorf("Rules() = %d, want 4", got)
	}
	if got := Empty().Rules(); got != 0 {
		t.Errorf("Empty().Rules() = %d, want 0", got)
	}
}
