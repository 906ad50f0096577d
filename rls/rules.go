package rls

// Rules returns the number of rules (descriptors with a rate_limit, an
// unlimited one included) in every domain of c.
func (c *Config) Rules() int {
	n := 0
	var walk func(*descriptorNode)
	walk = func(d *descriptorNode) {
		if d.rule != nil {
			n++
		}
		for _, ch := range d.children {
			walk(ch)
		}
	}
	for _, d := range c.domains {
		walk(d)
	}
	return n
}
