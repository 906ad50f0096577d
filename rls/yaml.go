package rls

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The file format, as the reference reads it with yaml.v2 (non-strict):
//
//	domain: <string, required>
//	descriptors:
//	  - key: <string, required>
//	    value: <string>            # "prefix*" matches by prefix
//	    rate_limit:
//	      unit: second | minute | hour | day | week | month | year   # any case
//	      requests_per_unit: <0..4294967295>
//	      unlimited: <bool>         # no unit then
//	      name: <string>
//	      replaces: [{name: <string>}]
//	    shadow_mode / quota_mode / detailed_metric / value_to_metric / share_threshold: <bool>
//	    descriptors: [...]         # nested, same shape
//
// Rules taken from the reference: every key anywhere must be one of the
// format's keys (a key of another level is accepted and ignored: this
// package reports it in Config.Warnings); every list must be a list of
// mappings; a float scalar is an error anywhere; a string field takes any
// scalar as text; a bool takes YAML 1.1's plain yes/no/on/off/true/false
// (y and n too); a null counts as absent. Anchors, aliases and merge keys
// ("<<") work as in yaml.v2, and a key given twice keeps its last value
// (with a warning).

// validKeys are the reference's keys: valid at any level.
var validKeys = map[string]bool{
	"domain": true, "key": true, "value": true, "descriptors": true, "rate_limit": true,
	"unit": true, "requests_per_unit": true, "unlimited": true, "shadow_mode": true,
	"quota_mode": true, "name": true, "replaces": true, "detailed_metric": true,
	"value_to_metric": true, "share_threshold": true,
}

// The keys each level reads; the others are ignored there.
var (
	rootKeys       = "domain, descriptors"
	descriptorKeys = "key, value, rate_limit, descriptors, shadow_mode, quota_mode, detailed_metric, value_to_metric, share_threshold"
	rateLimitKeys  = "unit, requests_per_unit, unlimited, name, replaces"
	replacesKeys   = "name"
)

// yamlRoot is a decoded file.
type yamlRoot struct {
	domain      string
	domainLine  int
	descriptors []yamlDescriptor
}

// yamlDescriptor is a decoded descriptor; path and line locate it.
type yamlDescriptor struct {
	key, value                                                           string
	rateLimit                                                            *yamlRateLimit
	descriptors                                                          []yamlDescriptor
	shadowMode, quotaMode, detailedMetric, valueToMetric, shareThreshold bool
	path                                                                 string
	line                                                                 int
}

// yamlRateLimit is a decoded rate_limit block.
type yamlRateLimit struct {
	requestsPerUnit uint32
	unit            string
	unitLine        int
	unlimited       bool
	name            string
	replaces        []yamlReplace
	line            int
}

// yamlReplace is one entry of replaces.
type yamlReplace struct {
	name string
	line int
}

// nodeBudget bounds the nodes the walk of a file of n bytes may visit,
// aliases followed: without aliases a file has fewer nodes than bytes, so
// a file expanding to more ("billion laughs") fails instead of exhausting
// the node, while real use of anchors stays far below it.
func nodeBudget(n int) int { return 4*n + 1024 }

// maxDepth bounds the nesting of descriptors (and of the mappings and
// lists of keys the reference ignores), far above any real configuration.
const maxDepth = 300

// decoder walks one file's YAML tree.
type decoder struct {
	file     string
	nodes    int // budget left
	depth    int
	warnings []string
}

// enter counts one more level of nesting at n; leave undoes it.
func (d *decoder) enter(n *yaml.Node, path string) error {
	if d.depth++; d.depth > maxDepth {
		// No field: its path would be maxDepth levels long.
		return d.errorf(n, "", "nested more than %d levels deep (an alias that contains itself?)", maxDepth)
	}
	return nil
}

func (d *decoder) leave() { d.depth-- }

// errorf returns an *Error at node n (which may be nil).
func (d *decoder) errorf(n *yaml.Node, field, format string, args ...any) *Error {
	e := &Error{File: d.file, Field: field, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line = n.Line
	}
	return e
}

func (d *decoder) warnf(n *yaml.Node, field, format string, args ...any) {
	d.warnings = append(d.warnings, d.errorf(n, field, format, args...).Error())
}

// decodeFile parses one file.
func decodeFile(file string, data []byte) (root yamlRoot, warnings []string, err error) {
	d := &decoder{file: file, nodes: nodeBudget(len(data))}
	doc, err := d.document(data)
	if err != nil {
		return root, nil, err
	}
	if doc != nil {
		err = d.root(doc, &root)
	}
	return root, d.warnings, err
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// document parses data into its first document's root node (nil for an
// empty document). A YAML library panic is an error, never a crash.
func (d *decoder) document(data []byte) (root *yaml.Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			root, err = nil, d.errorf(nil, "", "malformed YAML: %v", r)
		}
	}()
	var doc yaml.Node
	switch err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); {
	case errors.Is(err, io.EOF):
		return nil, nil
	case err != nil:
		e := d.errorf(nil, "", "malformed YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			e.Line, _ = strconv.Atoi(m[1])
			e.Msg = "malformed YAML: " + strings.TrimPrefix(err.Error(), m[0])
		}
		return nil, e
	}
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil, nil
		}
		return doc.Content[0], nil
	}
	return &doc, nil
}

// resolve follows aliases, counting the nodes visited against maxNodes.
func (d *decoder) resolve(n *yaml.Node) (*yaml.Node, error) {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i > 8 {
			return nil, d.errorf(n, "", "alias chain too long")
		}
		n = n.Alias
	}
	if d.nodes--; d.nodes < 0 {
		return nil, d.errorf(n, "", "the file expands to too many nodes through its aliases")
	}
	return n, nil
}

// isNull reports whether n is absent or a YAML null.
func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// pair is one key and value of a mapping.
type pair struct {
	key   string
	kn, v *yaml.Node
}

// pairs returns the key/value pairs of mapping n, merges expanded (the
// mapping's own keys first, then merged ones it does not override), keys
// checked against validKeys. A key given twice keeps its last value.
func (d *decoder) pairs(n *yaml.Node, path string) ([]pair, error) {
	var own, merged []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, err := d.resolve(n.Content[i])
		if err != nil {
			return nil, err
		}
		v := n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			ms, err := d.mergeSources(v, path)
			if err != nil {
				return nil, err
			}
			for _, m := range ms {
				mp, err := d.pairs(m, path)
				if err != nil {
					return nil, err
				}
				merged = append(merged, mp...)
			}
			continue
		}
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			text := k.Value
			if k.Kind != yaml.ScalarNode {
				text = "a " + kindName(k)
			}
			return nil, d.errorf(k, path, "config error, key is not of type string: %s", text)
		}
		if !validKeys[k.Value] {
			return nil, d.errorf(k, join(path, k.Value), "config error, unknown key '%s'", k.Value)
		}
		own = append(own, pair{k.Value, k, v})
	}
	out := make([]pair, 0, len(own)+len(merged))
	seen := make(map[string]int, len(own)+len(merged))
	for _, p := range own {
		if i, dup := seen[p.key]; dup {
			d.warnf(p.kn, join(path, p.key), "given twice (line %d too); the last one counts", out[i].kn.Line)
			out[i] = p
			continue
		}
		seen[p.key] = len(out)
		out = append(out, p)
	}
	for _, p := range merged {
		if _, dup := seen[p.key]; !dup {
			seen[p.key] = len(out)
			out = append(out, p)
		}
	}
	return out, nil
}

// mergeSources returns the mappings a merge key's value names.
func (d *decoder) mergeSources(v *yaml.Node, path string) ([]*yaml.Node, error) {
	v, err := d.resolve(v)
	if err != nil {
		return nil, err
	}
	switch v.Kind {
	case yaml.MappingNode:
		return []*yaml.Node{v}, nil
	case yaml.SequenceNode:
		out := make([]*yaml.Node, 0, len(v.Content))
		for _, e := range v.Content {
			m, err := d.resolve(e)
			if err != nil {
				return nil, err
			}
			if m.Kind != yaml.MappingNode {
				return nil, d.errorf(m, join(path, "<<"), "a merge takes mappings, not a %s", kindName(m))
			}
			out = append(out, m)
		}
		return out, nil
	}
	return nil, d.errorf(v, join(path, "<<"), "a merge takes a mapping or a list of mappings, not a %s", kindName(v))
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "scalar " + n.ShortTag()
	}
	return "node"
}

func join(path, field string) string {
	switch {
	case path == "":
		return field
	case field == "":
		return path
	}
	return path + "." + field
}

// root decodes the document root.
func (d *decoder) root(n *yaml.Node, out *yamlRoot) error {
	n, err := d.resolve(n)
	if err != nil {
		return err
	}
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return d.errorf(n, "", "error loading config file: the document is a %s, not a mapping", kindName(n))
	}
	ps, err := d.pairs(n, "")
	if err != nil {
		return err
	}
	for _, p := range ps {
		switch p.key {
		case "domain":
			out.domainLine = p.kn.Line
			if out.domain, err = d.str(p.v, "domain"); err != nil {
				return err
			}
		case "descriptors":
			if out.descriptors, err = d.descriptors(p.v, "descriptors"); err != nil {
				return err
			}
		default:
			if err := d.ignored(p, "", "the top level", rootKeys); err != nil {
				return err
			}
		}
	}
	return nil
}

// ignored checks a key the level does not read (the reference accepts
// and ignores it) and warns about it.
func (d *decoder) ignored(p pair, path, level, want string) error {
	field := join(path, p.key)
	d.warnf(p.kn, field, "ignored: %s takes %s", level, want)
	return d.generic(p.v, field)
}

// generic checks a value the way the reference's validateYamlKeys does,
// without decoding it: mappings have valid string keys, lists hold
// mappings, scalars are not floats.
func (d *decoder) generic(n *yaml.Node, path string) error {
	n, err := d.resolve(n)
	if err != nil {
		return err
	}
	if err := d.enter(n, path); err != nil {
		return err
	}
	defer d.leave()
	switch n.Kind {
	case yaml.MappingNode:
		ps, err := d.pairs(n, path)
		if err != nil {
			return err
		}
		for _, p := range ps {
			if err := d.generic(p.v, join(path, p.key)); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, e := range n.Content {
			if _, err := d.listMapping(e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
			if err := d.generic(e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		return d.leaf(n, path)
	}
	return nil
}

// leaf checks a scalar as the reference does: floats (and integers beyond
// int64) fail its "error checking config".
func (d *decoder) leaf(n *yaml.Node, path string) error {
	switch n.ShortTag() {
	case "!!float":
		return d.errorf(n, path, "error checking config: %q is a float, which envoyproxy/ratelimit rejects (quote it to make it a string)", n.Value)
	case "!!int":
		if _, ok := parseInt(n.Value); !ok {
			return d.errorf(n, path, "error checking config: %s is out of the range of a 64-bit integer", n.Value)
		}
	}
	return nil
}

// listMapping checks that a list element is a mapping.
func (d *decoder) listMapping(e *yaml.Node, path string) (*yaml.Node, error) {
	m, err := d.resolve(e)
	if err != nil {
		return nil, err
	}
	if m.Kind != yaml.MappingNode {
		text := m.Value
		if m.Kind != yaml.ScalarNode {
			text = "a " + kindName(m)
		}
		return nil, d.errorf(m, path, "config error, yaml file contains list of type other than map: %s", text)
	}
	return m, nil
}
