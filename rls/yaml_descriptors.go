package rls

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// descriptors decodes a list of descriptors; null is none.
func (d *decoder) descriptors(n *yaml.Node, path string) ([]yamlDescriptor, error) {
	return listOf(d, n, path, "a list of descriptors", true, d.descriptor)
}

// listOf decodes a list of mappings with item; null is none. nested
// counts the list as a level of nesting (descriptors in descriptors).
func listOf[T any](d *decoder, n *yaml.Node, path, what string, nested bool, item func(m *yaml.Node, path string) (T, error)) ([]T, error) {
	n, err := d.resolve(n)
	if err != nil {
		return nil, err
	}
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, d.errorf(n, path, "cannot unmarshal a %s into %s", kindName(n), what)
	}
	if nested {
		if err := d.enter(n, path); err != nil {
			return nil, err
		}
		defer d.leave()
	}
	out := make([]T, 0, len(n.Content))
	for i, e := range n.Content {
		ipath := fmt.Sprintf("%s[%d]", path, i)
		m, err := d.listMapping(e, ipath)
		if err != nil {
			return nil, err
		}
		v, err := item(m, ipath)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// descriptor decodes one descriptor mapping.
func (d *decoder) descriptor(m *yaml.Node, path string) (yamlDescriptor, error) {
	out := yamlDescriptor{path: path, line: m.Line}
	ps, err := d.pairs(m, path)
	if err != nil {
		return out, err
	}
	for _, p := range ps {
		field := join(path, p.key)
		var b *bool
		switch p.key {
		case "key":
			out.key, err = d.str(p.v, field)
		case "value":
			out.value, err = d.str(p.v, field)
		case "rate_limit":
			out.rateLimit, err = d.rateLimit(p.v, field, p.kn.Line)
		case "descriptors":
			out.descriptors, err = d.descriptors(p.v, field)
		case "shadow_mode":
			b = &out.shadowMode
		case "quota_mode":
			b = &out.quotaMode
		case "detailed_metric":
			b = &out.detailedMetric
		case "value_to_metric":
			b = &out.valueToMetric
		case "share_threshold":
			b = &out.shareThreshold
		default:
			err = d.ignored(p, path, "a descriptor", descriptorKeys)
		}
		if b != nil {
			*b, err = d.boolean(p.v, field)
		}
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// rateLimit decodes a rate_limit block, whose key is at line; null is
// none.
func (d *decoder) rateLimit(n *yaml.Node, path string, line int) (*yamlRateLimit, error) {
	n, err := d.resolve(n)
	if err != nil {
		return nil, err
	}
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, d.errorf(n, path, "cannot unmarshal a %s into a rate_limit mapping", kindName(n))
	}
	out := &yamlRateLimit{line: line}
	ps, err := d.pairs(n, path)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		field := join(path, p.key)
		switch p.key {
		case "requests_per_unit":
			out.requestsPerUnit, err = d.uint32Field(p.v, field)
		case "unit":
			out.unitLine = p.kn.Line
			out.unit, err = d.str(p.v, field)
		case "unlimited":
			out.unlimited, err = d.boolean(p.v, field)
		case "name":
			out.name, err = d.str(p.v, field)
		case "replaces":
			out.replaces, err = d.replaces(p.v, field)
		default:
			err = d.ignored(p, path, "rate_limit", rateLimitKeys)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// replaces decodes the replaces list.
func (d *decoder) replaces(n *yaml.Node, path string) ([]yamlReplace, error) {
	return listOf(d, n, path, "a list of {name: ...}", false, func(m *yaml.Node, ipath string) (yamlReplace, error) {
		r := yamlReplace{line: m.Line}
		ps, err := d.pairs(m, ipath)
		if err != nil {
			return r, err
		}
		for _, p := range ps {
			if p.key == "name" {
				r.name, err = d.str(p.v, join(ipath, "name"))
			} else {
				err = d.ignored(p, ipath, "a replaces entry", replacesKeys)
			}
			if err != nil {
				return r, err
			}
		}
		return r, nil
	})
}
