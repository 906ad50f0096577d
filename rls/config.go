package rls

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrInvalidConfig is wrapped by every *Error: a file that is not valid
// envoyproxy/ratelimit configuration.
var ErrInvalidConfig = errors.New("rls: invalid config")

// Error is an invalid file: it names the file, the line (0 if unknown) and
// the field (a path such as "descriptors[0].rate_limit.unit"; empty for
// the file as a whole). Msg is worded as the reference words it.
type Error struct {
	File  string
	Line  int
	Field string
	Msg   string
}

// Error formats the error as "rls: FILE:LINE: FIELD: MSG".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("rls: ")
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns ErrInvalidConfig.
func (e *Error) Unwrap() error { return ErrInvalidConfig }

// Rule is the rate_limit of one configured descriptor (or a request's
// limit override).
type Rule struct {
	// FullKey is the rule's path, "domain.key_value.key2": the reference's
	// metric key for the rule (a match may refine it, see Match.StatsKey).
	FullKey string
	// RequestsPerUnit is the limit per Unit; 0 denies every hit.
	RequestsPerUnit uint32
	// Unit is the window; UnitUnknown only when Unlimited.
	Unit Unit
	// Name is the rate_limit's name, which replaces of other rules name.
	Name string
	// Replaces are the names of the rules this one replaces.
	Replaces []string
	// Unlimited rules count nothing and answer OK.
	Unlimited bool
	// ShadowMode rules count and report, but always answer OK.
	ShadowMode bool
	// QuotaMode rules count, but answer OK when over the limit (and the
	// reference's response then carries no duration_until_reset).
	QuotaMode bool
	// DetailedMetric gives every value matched by the rule a metric key of
	// its own.
	DetailedMetric bool
}

// descriptorNode is one level of a domain's descriptor tree.
type descriptorNode struct {
	children map[string]*descriptorNode // by "key_value", or "key" for a key-only descriptor
	// wildcardKeys are the children's map keys that end in "*", in file
	// order: a value that no child names exactly matches the first whose
	// prefix it has.
	wildcardKeys    []string
	rule            *Rule
	valueToMetric   bool
	shareThreshold  bool
	wildcardPattern string // the node's own map key when it shares its threshold
}

// Config is a loaded configuration: the domains of every file. It is
// immutable and safe for concurrent use.
type Config struct {
	domains map[string]*descriptorNode
	// Files are the files it was loaded from, in load order.
	Files []string
	// Warnings report what the files hold that the reference ignores (a
	// key at a level that does not read it, a key given twice).
	Warnings []string
	// Digest identifies the files' names and contents, so that a reload of
	// unchanged files can be told apart.
	Digest string
	// ContentHash identifies the files' contents alone, in load order (and
	// the options): nodes that load the same files from different paths
	// have the same one.
	ContentHash string
}

// Empty returns a configuration with no domains: every domain is unknown.
// Its Digest and ContentHash are those of Parse of no files.
func Empty() *Config {
	h := sha256.Sum256(nil)
	return &Config{domains: map[string]*descriptorNode{}, Digest: hex.EncodeToString(h[:]), ContentHash: hex.EncodeToString(h[:])}
}

// HasDomain reports whether the domain is configured.
func (c *Config) HasDomain(domain string) bool { return c.domains[domain] != nil }

// Domains returns the configured domains, sorted.
func (c *Config) Domains() []string {
	out := make([]string, 0, len(c.domains))
	for d := range c.domains {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// File is one configuration file's name (for errors) and contents.
type File struct {
	Name string
	Data []byte
}

// Options are the reference's settings that change how files load.
type Options struct {
	// MergeDomains lets several files configure one domain (the
	// reference's MERGE_DOMAIN_CONFIG); otherwise a domain in two files is
	// an error.
	MergeDomains bool
}

// Parse builds a configuration from files, each one domain, in order.
// The first invalid file makes it fail with an *Error.
func Parse(files []File, opt Options) (*Config, error) {
	c := Empty()
	h, ch := sha256.New(), sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%d:%s%d:", len(f.Name), f.Name, len(f.Data))
		h.Write(f.Data)
		fmt.Fprintf(ch, "%d:", len(f.Data))
		ch.Write(f.Data)
		root, warnings, err := decodeFile(f.Name, f.Data)
		if err != nil {
			return nil, err
		}
		c.Warnings = append(c.Warnings, warnings...)
		if err := c.addFile(f.Name, root, opt); err != nil {
			return nil, err
		}
		c.Files = append(c.Files, f.Name)
	}
	if opt.MergeDomains {
		h.Write([]byte("merge"))
		ch.Write([]byte("merge"))
	}
	c.Digest = hex.EncodeToString(h.Sum(nil))
	c.ContentHash = hex.EncodeToString(ch.Sum(nil))
	return c, nil
}

// addFile loads one decoded file, as the reference's loadConfig does.
func (c *Config) addFile(file string, root yamlRoot, opt Options) error {
	if root.domain == "" {
		return &Error{File: file, Line: root.domainLine, Field: "domain", Msg: "config file cannot have empty domain"}
	}
	dom, present := c.domains[root.domain]
	if present && !opt.MergeDomains {
		return &Error{File: file, Line: root.domainLine, Field: "domain",
			Msg: fmt.Sprintf("duplicate domain '%s' in config file", root.domain)}
	}
	if !present {
		dom = &descriptorNode{children: map[string]*descriptorNode{}}
	}
	if err := dom.load(file, root.domain+".", root.descriptors); err != nil {
		return err
	}
	c.domains[root.domain] = dom
	return nil
}

// load adds descriptors under n, as the reference's loadDescriptors does;
// parentKey is the path of n ("domain.", "domain.key_value.").
func (n *descriptorNode) load(file, parentKey string, descs []yamlDescriptor) error {
	for i := range descs {
		dc := &descs[i]
		fail := func(field, format string, args ...any) error {
			return &Error{File: file, Line: dc.line, Field: join(dc.path, field), Msg: fmt.Sprintf(format, args...)}
		}
		if dc.key == "" {
			return fail("key", "descriptor has empty key")
		}
		finalKey := dc.key
		if dc.value != "" {
			finalKey += "_" + dc.value
		}
		fullKey := parentKey + finalKey
		if _, dup := n.children[finalKey]; dup {
			return fail("", "duplicate descriptor composite key '%s'", fullKey)
		}
		var rule *Rule
		if rl := dc.rateLimit; rl != nil {
			unit, valid := ParseUnit(rl.unit)
			switch {
			case rl.unlimited && valid:
				return &Error{File: file, Line: rl.unitLine, Field: join(dc.path, "rate_limit.unit"), Msg: "should not specify rate limit unit when unlimited"}
			case !rl.unlimited && !valid:
				line := rl.unitLine
				if line == 0 {
					line = rl.line
				}
				return &Error{File: file, Line: line, Field: join(dc.path, "rate_limit.unit"),
					Msg: fmt.Sprintf("invalid rate limit unit '%s'", rl.unit)}
			}
			rule = &Rule{FullKey: fullKey, RequestsPerUnit: rl.requestsPerUnit, Unit: unit, Name: rl.name,
				Unlimited: rl.unlimited, ShadowMode: dc.shadowMode, QuotaMode: dc.quotaMode, DetailedMetric: dc.detailedMetric}
			for j, r := range rl.replaces {
				field := fmt.Sprintf("%s.rate_limit.replaces[%d].name", dc.path, j)
				if r.name == "" {
					return &Error{File: file, Line: r.line, Field: field, Msg: "should not have an empty replaces entry"}
				}
				if r.name == rl.name {
					return &Error{File: file, Line: r.line, Field: field, Msg: "replaces should not contain name of same descriptor"}
				}
				rule.Replaces = append(rule.Replaces, r.name)
			}
		}
		wildcard := strings.HasSuffix(finalKey, "*")
		if dc.shareThreshold && !wildcard {
			return fail("share_threshold", "share_threshold can only be used with wildcard values (ending with '*'), but found key '%s'", finalKey)
		}
		child := &descriptorNode{children: map[string]*descriptorNode{}, rule: rule,
			valueToMetric: dc.valueToMetric, shareThreshold: dc.shareThreshold}
		if dc.shareThreshold {
			child.wildcardPattern = finalKey
		}
		if wildcard {
			n.wildcardKeys = append(n.wildcardKeys, finalKey)
		}
		if err := child.load(file, fullKey+".", dc.descriptors); err != nil {
			return err
		}
		n.children[finalKey] = child
	}
	return nil
}
