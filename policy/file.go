package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/sluice-rl/sluice/bucket"
)

// The policy file is YAML:
//
//	allow_inline: true        # optional, default true: may checks carry inline limits?
//	policies:
//	  api:                    # name: [A-Za-z0-9_.:-]{1,64}
//	    algorithm: token_bucket   # token_bucket (default) | sliding_window | fixed_window | sliding_log | concurrency | fixed_window_hits
//	    limit: 100
//	    period: 1m            # required except for concurrency and with a calendar; Go syntax or whole days ("7d")
//	    calendar: month       # instead of period: day | week (ISO, from Monday) | month | year;
//	                          # token_bucket (a quota, full at each boundary), fixed_window, fixed_window_hits
//	    timezone: Europe/Berlin   # optional, with calendar: an IANA zone; default UTC
//	    burst: 200            # optional, token_bucket only
//	    failure_mode: local   # local (default) | deny | allow
//	    grants: auto          # auto (default) | always | never: local token grants for hot keys
//
// Unknown fields are errors, as are YAML merge keys ("<<"); anchors and
// aliases are allowed. A null value (e.g. "burst:" with nothing after it)
// counts as not given.

// MaxNameLen is the longest policy name.
const MaxNameLen = 64

// FileError is an error in a policy file. It wraps ErrInvalid and, where
// one applies, a more specific sentinel (bucket.ErrInvalidLimit,
// bucket.ErrUnknownAlgorithm, ErrUnknownFailureMode, ErrDuration).
type FileError struct {
	// Line is the 1-based line of the offending YAML node, 0 if unknown.
	Line int
	// Path names the offending field, e.g. "policies.api.limit"; empty for
	// errors about the document as a whole.
	Path string
	// Reason says what is wrong, e.g. "must be > 0".
	Reason string
	// Err is the specific sentinel, or nil.
	Err error
}

// Error formats the error as "policy: invalid: [line N: ][path: ]reason".
func (e *FileError) Error() string {
	var b []byte
	b = append(b, ErrInvalid.Error()...)
	b = append(b, ": "...)
	if e.Line > 0 {
		b = append(b, "line "...)
		b = strconv.AppendInt(b, int64(e.Line), 10)
		b = append(b, ": "...)
	}
	if e.Path != "" {
		b = append(b, e.Path...)
		b = append(b, ": "...)
	}
	b = append(b, e.Reason...)
	return string(b)
}

// Unwrap returns ErrInvalid and the specific sentinel, if any.
func (e *FileError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalid, e.Err}
	}
	return []error{ErrInvalid}
}

// Load reads and parses the policy file at path.
func Load(path string) (*Set, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Parse parses a policy file. An empty file is an empty set that allows
// inline limits. Errors are *FileError (they wrap ErrInvalid) and name the
// offending field.
func Parse(data []byte) (*Set, error) {
	root, err := decodeDocument(data)
	if err != nil {
		return nil, err
	}
	p := parser{allowInline: true}
	if err := p.document(root); err != nil {
		return nil, err
	}
	s, err := NewSet(p.allowInline, p.policies...)
	if err != nil {
		// Unreachable: every policy was validated and names are unique.
		return nil, &FileError{Reason: err.Error()}
	}
	return s, nil
}

// decodeDocument parses data into the root node of its single document; nil
// means an empty document.
func decodeDocument(data []byte) (root *yaml.Node, err error) {
	// The YAML library reports most malformed input as errors; a panic
	// would be a bug there, and a policy file must never crash the node.
	defer func() {
		if r := recover(); r != nil {
			root, err = nil, &FileError{Reason: fmt.Sprintf("malformed YAML: %v", r)}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var doc yaml.Node
	switch err := dec.Decode(&doc); {
	case errors.Is(err, io.EOF):
		return nil, nil
	case err != nil:
		return nil, &FileError{Reason: trimYAMLError(err)}
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, &FileError{Reason: trimYAMLError(err)}
	default:
		return nil, &FileError{Line: extra.Line, Reason: "a policy file holds a single YAML document"}
	}
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil, nil
		}
		return doc.Content[0], nil
	}
	return &doc, nil
}

// trimYAMLError drops the library's "yaml: " prefix.
func trimYAMLError(err error) string {
	msg := err.Error()
	if len(msg) > 6 && msg[:6] == "yaml: " {
		msg = msg[6:]
	}
	return "malformed YAML: " + msg
}

// parser walks the document tree.
type parser struct {
	allowInline bool
	policies    []Policy
}

// resolve follows an alias to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	// An alias always names an anchored node that is not itself an alias,
	// but stay defensive: a hand-built tree could chain them.
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 8; i++ {
		n = n.Alias
	}
	return n
}

// isNull reports whether n is absent or a YAML null.
func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// mappingPairs checks that n is a mapping without merge keys and returns
// its key/value pairs, keys resolved.
func mappingPairs(n *yaml.Node, path, what string) ([][2]*yaml.Node, error) {
	if n == nil || n.Kind != yaml.MappingNode {
		line := 0
		if n != nil {
			line = n.Line
		}
		if path == "" {
			return nil, &FileError{Line: line, Reason: "the document must be a mapping of " + what}
		}
		return nil, &FileError{Line: line, Path: path, Reason: "must be a mapping of " + what}
	}
	pairs := make([][2]*yaml.Node, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k == nil || k.Kind != yaml.ScalarNode {
			line := n.Content[i].Line
			return nil, &FileError{Line: line, Path: path, Reason: "keys must be plain strings"}
		}
		if k.ShortTag() == "!!merge" {
			return nil, &FileError{Line: k.Line, Path: path, Reason: "merge keys (<<) are not supported"}
		}
		pairs = append(pairs, [2]*yaml.Node{k, v})
	}
	return pairs, nil
}

func (p *parser) document(root *yaml.Node) error {
	root = resolve(root)
	if isNull(root) {
		return nil
	}
	pairs, err := mappingPairs(root, "", "allow_inline and policies")
	if err != nil {
		return err
	}
	seen := make(map[string]int, 2)
	for _, kv := range pairs {
		k, v := kv[0], kv[1]
		if line, dup := seen[k.Value]; dup {
			return &FileError{Line: k.Line, Path: k.Value, Reason: fmt.Sprintf("already given at line %d", line)}
		}
		seen[k.Value] = k.Line
		switch k.Value {
		case "allow_inline":
			b, ok, err := boolField(v, "allow_inline")
			if err != nil {
				return err
			}
			if ok {
				p.allowInline = b
			}
		case "policies":
			if err := p.policyMap(v); err != nil {
				return err
			}
		default:
			return &FileError{Line: k.Line, Reason: fmt.Sprintf("field %s not found (want allow_inline or policies)", k.Value)}
		}
	}
	return nil
}

func (p *parser) policyMap(n *yaml.Node) error {
	n = resolve(n)
	if isNull(n) {
		return nil
	}
	pairs, err := mappingPairs(n, "policies", "policy names to policies")
	if err != nil {
		return err
	}
	seen := make(map[string]int, len(pairs))
	for _, kv := range pairs {
		k, v := kv[0], kv[1]
		name := k.Value
		if k.ShortTag() == "!!null" || !ValidName(name) {
			return &FileError{Line: k.Line, Path: "policies", Reason: fmt.Sprintf("invalid policy name %s: want 1 to %d of A-Z a-z 0-9 _ . : -", Echo(name), MaxNameLen)}
		}
		path := "policies." + name
		if line, dup := seen[name]; dup {
			return &FileError{Line: k.Line, Path: path, Reason: fmt.Sprintf("defined twice (first at line %d)", line)}
		}
		seen[name] = k.Line
		pol, err := policyFields(name, path, v)
		if err != nil {
			return err
		}
		p.policies = append(p.policies, pol)
	}
	return nil
}

// ValidName reports whether s is a valid policy name: 1 to MaxNameLen
// characters from [A-Za-z0-9_.:-].
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '_', c == '.', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// policyFields parses and validates one policy.
func policyFields(name, path string, n *yaml.Node) (Policy, error) {
	pol := Policy{Name: name, Limit: bucket.Limit{Algorithm: bucket.TokenBucket}}
	n = resolve(n)
	pairs, err := mappingPairs(n, path, "fields (algorithm, limit, period, calendar, timezone, burst, failure_mode, grants, max_ttl)")
	if err != nil {
		return pol, err
	}
	var (
		seen       = make(map[string]int, len(pairs))
		burstGiven bool
		burstLine  int
		maxTTLLine int
		periodNode *yaml.Node
	)
	for _, kv := range pairs {
		k, v := kv[0], kv[1]
		fpath := path + "." + k.Value
		if line, dup := seen[k.Value]; dup {
			return pol, &FileError{Line: k.Line, Path: fpath, Reason: fmt.Sprintf("already given at line %d", line)}
		}
		seen[k.Value] = k.Line
		switch k.Value {
		case "algorithm":
			s, ok, err := stringField(v, fpath)
			if err != nil {
				return pol, err
			}
			if ok {
				a, err := bucket.ParseAlgorithm(s)
				if err != nil {
					return pol, &FileError{Line: lineOf(v), Path: fpath, Err: bucket.ErrUnknownAlgorithm,
						Reason: fmt.Sprintf("unknown algorithm %s (want token_bucket, sliding_window, fixed_window, sliding_log, concurrency or fixed_window_hits)", Echo(s))}
				}
				pol.Limit.Algorithm = a
			}
		case "limit":
			i, _, err := intField(v, fpath)
			if err != nil {
				return pol, err
			}
			pol.Limit.Limit = i
		case "period":
			s, ok, err := stringField(v, fpath)
			if err != nil {
				return pol, err
			}
			if ok {
				d, err := ParseDuration(s)
				if err != nil {
					return pol, &FileError{Line: lineOf(v), Path: fpath, Err: ErrDuration,
						Reason: fmt.Sprintf("invalid duration %s: want e.g. 500ms, 1m, 1h30m or 7d", Echo(s))}
				}
				pol.Limit.Period = d
				periodNode = v
			}
		case "calendar", "timezone":
			if err := calendarField(&pol, k.Value, v, fpath); err != nil {
				return pol, err
			}
		case "burst":
			i, ok, err := intField(v, fpath)
			if err != nil {
				return pol, err
			}
			pol.Limit.Burst, burstGiven, burstLine = i, ok, lineOf(v)
		case "failure_mode":
			s, ok, err := stringField(v, fpath)
			if err != nil {
				return pol, err
			}
			if ok {
				m, err := ParseFailureMode(s)
				if err != nil {
					return pol, &FileError{Line: lineOf(v), Path: fpath, Err: ErrUnknownFailureMode,
						Reason: fmt.Sprintf("unknown failure mode %s (want local, deny or allow)", Echo(s))}
				}
				pol.FailureMode = m
			}
		case "grants":
			s, ok, err := stringField(v, fpath)
			if err != nil {
				return pol, err
			}
			if ok {
				g, err := ParseGrantMode(s)
				if err != nil {
					return pol, &FileError{Line: lineOf(v), Path: fpath, Err: ErrInvalid,
						Reason: fmt.Sprintf("unknown grant mode %s (want auto, always or never)", Echo(s))}
				}
				pol.Grants = g
			}
		case "max_ttl":
			s, ok, err := stringField(v, fpath)
			if err != nil || !ok {
				return pol, err
			}
			d, err := ParseDuration(s)
			if err != nil || d <= 0 || d > MaxLeaseTTL {
				return pol, &FileError{Line: lineOf(v), Path: fpath, Err: ErrDuration,
					Reason: fmt.Sprintf("invalid max_ttl %s: want a duration in (0, %s], e.g. 30s or 10m", Echo(s), MaxLeaseTTL)}
			}
			pol.MaxTTL, maxTTLLine = d, lineOf(v)
		default:
			return pol, &FileError{Line: k.Line, Reason: fmt.Sprintf("field %.64s not found in %s (want algorithm, limit, period, calendar, timezone, burst, failure_mode, grants or max_ttl)", k.Value, path)}
		}
	}
	if pol.MaxTTL != 0 && pol.Limit.Algorithm != bucket.Concurrency {
		return pol, &FileError{Line: maxTTLLine, Path: path + ".max_ttl", Err: bucket.ErrInvalidLimit,
			Reason: fmt.Sprintf("only concurrency takes a max_ttl, not %s", pol.Limit.Algorithm)}
	}
	if burstGiven && pol.Limit.Algorithm != bucket.TokenBucket {
		return pol, &FileError{Line: burstLine, Path: path + ".burst", Err: bucket.ErrInvalidLimit,
			Reason: fmt.Sprintf("only token_bucket takes a burst, not %s", pol.Limit.Algorithm)}
	}
	if err := pol.Limit.Validate(); err != nil {
		var fe *bucket.FieldError
		if errors.As(err, &fe) {
			reason := fe.Reason
			if fe.Field == "period" && periodNode == nil {
				reason = "required for " + pol.Limit.Algorithm.String()
			}
			return pol, &FileError{Path: path + "." + fe.Field, Reason: reason, Err: fe.Err}
		}
		return pol, &FileError{Path: path, Reason: err.Error(), Err: bucket.ErrInvalidLimit}
	}
	return pol, nil
}

func lineOf(n *yaml.Node) int {
	if n == nil {
		return 0
	}
	return n.Line
}

// scalar resolves n and checks that it is a non-null scalar; ok is false
// for a null value.
func scalar(n *yaml.Node, path, want string) (s *yaml.Node, ok bool, err error) {
	s = resolve(n)
	if isNull(s) {
		return nil, false, nil
	}
	if s.Kind != yaml.ScalarNode {
		return nil, false, &FileError{Line: lineOf(n), Path: path, Reason: "must be " + want}
	}
	return s, true, nil
}

func stringField(n *yaml.Node, path string) (string, bool, error) {
	s, ok, err := scalar(n, path, "a string")
	if !ok {
		return "", false, err
	}
	return s.Value, true, nil
}

func intField(n *yaml.Node, path string) (int64, bool, error) {
	s, ok, err := scalar(n, path, "an integer")
	if !ok {
		return 0, false, err
	}
	var i int64
	// Insist on an integer tag: the YAML library would truncate 1.5 to 1.
	if s.ShortTag() != "!!int" || s.Decode(&i) != nil {
		return 0, false, &FileError{Line: s.Line, Path: path, Err: bucket.ErrInvalidLimit,
			Reason: fmt.Sprintf("must be an integer, not %s", Echo(s.Value))}
	}
	return i, true, nil
}

func boolField(n *yaml.Node, path string) (bool, bool, error) {
	s, ok, err := scalar(n, path, "true or false")
	if !ok {
		return false, false, err
	}
	var b bool
	if s.ShortTag() != "!!bool" || s.Decode(&b) != nil {
		return false, false, &FileError{Line: s.Line, Path: path, Reason: fmt.Sprintf("must be true or false, not %s", Echo(s.Value))}
	}
	return b, true, nil
}
