package rls

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// str decodes a string field: any scalar, as its text; null is "".
func (d *decoder) str(n *yaml.Node, path string) (string, error) {
	n, err := d.resolve(n)
	if err != nil {
		return "", err
	}
	if isNull(n) {
		return "", nil
	}
	if n.Kind != yaml.ScalarNode {
		return "", d.errorf(n, path, "cannot unmarshal a %s into a string", kindName(n))
	}
	if err := d.leaf(n, path); err != nil {
		return "", err
	}
	return n.Value, nil
}

// yaml11Bools are the plain scalars yaml.v2 reads as booleans.
var yaml11Bools = map[string]bool{
	"y": true, "Y": true, "yes": true, "Yes": true, "YES": true, "true": true, "True": true, "TRUE": true,
	"on": true, "On": true, "ON": true,
	"n": false, "N": false, "no": false, "No": false, "NO": false, "false": false, "False": false, "FALSE": false,
	"off": false, "Off": false, "OFF": false,
}

// boolean decodes a bool field; null is false.
func (d *decoder) boolean(n *yaml.Node, path string) (bool, error) {
	n, err := d.resolve(n)
	if err != nil {
		return false, err
	}
	if isNull(n) {
		return false, nil
	}
	if n.Kind == yaml.ScalarNode && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
		if b, ok := yaml11Bools[n.Value]; ok {
			return b, nil
		}
	}
	if n.Kind == yaml.ScalarNode {
		if err := d.leaf(n, path); err != nil {
			return false, err
		}
		return false, d.errorf(n, path, "cannot unmarshal %s `%s` into a bool (want true or false)", n.ShortTag(), n.Value)
	}
	return false, d.errorf(n, path, "cannot unmarshal a %s into a bool", kindName(n))
}

// uint32Field decodes requests_per_unit; null is 0.
func (d *decoder) uint32Field(n *yaml.Node, path string) (uint32, error) {
	n, err := d.resolve(n)
	if err != nil {
		return 0, err
	}
	if isNull(n) {
		return 0, nil
	}
	if n.Kind != yaml.ScalarNode {
		return 0, d.errorf(n, path, "cannot unmarshal a %s into an integer", kindName(n))
	}
	if err := d.leaf(n, path); err != nil {
		return 0, err
	}
	if n.ShortTag() == "!!int" {
		if v, ok := parseInt(n.Value); ok && v >= 0 && v <= 1<<32-1 {
			return uint32(v), nil
		}
		return 0, d.errorf(n, path, "cannot unmarshal !!int `%s` into uint32 (want 0 to 4294967295)", n.Value)
	}
	return 0, d.errorf(n, path, "cannot unmarshal %s `%s` into uint32 (want 0 to 4294967295)", n.ShortTag(), n.Value)
}

// parseInt parses a YAML integer (decimal, 0x, 0o, 0b, with _ separators).
func parseInt(s string) (int64, bool) {
	v, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 0, 64)
	return v, err == nil
}
