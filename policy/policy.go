package policy

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluice-rl/sluice/bucket"
)

// FailureMode says what a node does for a limit when the key's owner is
// unreachable.
type FailureMode uint8

// Failure modes. The zero value means FailLocal.
const (
	// FailLocal answers from a conservative local share of the limit.
	FailLocal FailureMode = iota
	// FailDeny denies (fail closed).
	FailDeny
	// FailAllow allows everything (fail open, unbounded). Discouraged.
	FailAllow
)

var failureModeNames = [...]string{FailLocal: "local", FailDeny: "deny", FailAllow: "allow"}

// String returns "local", "deny" or "allow".
func (m FailureMode) String() string {
	if int(m) < len(failureModeNames) {
		return failureModeNames[m]
	}
	return fmt.Sprintf("failure_mode(%d)", uint8(m))
}

// ErrUnknownFailureMode is returned by ParseFailureMode.
var ErrUnknownFailureMode = errors.New("policy: unknown failure mode")

// ErrInvalid marks a policy file or policy that fails validation.
var ErrInvalid = errors.New("policy: invalid")

// ParseFailureMode maps "local", "deny" or "allow" to a FailureMode; the empty
// string is FailLocal.
func ParseFailureMode(s string) (FailureMode, error) {
	if s == "" {
		return FailLocal, nil
	}
	for m, name := range failureModeNames {
		if name == s {
			return FailureMode(m), nil
		}
	}
	return 0, fmt.Errorf("%w: %s (want local, deny or allow)", ErrUnknownFailureMode, Echo(s))
}

// Policy is a named limit.
type Policy struct {
	// Name identifies the policy in checks and in the RateLimit-Policy header.
	Name string
	// Limit is the limit definition; it has passed Validate.
	Limit bucket.Limit
	// FailureMode applies when the key's owner is unreachable.
	FailureMode FailureMode
	// Grants says whether nodes that do not own a key may hold token
	// grants for it (token buckets only).
	Grants GrantMode
	// MaxTTL is the longest lease an Acquire may ask for (concurrency
	// only; at most MaxLeaseTTL); 0 means the node's default
	// (sluice serve --max-lease-ttl).
	MaxTTL time.Duration
}

// MaxLeaseTTL is the largest max_ttl a policy may give: the longest lease
// any node accepts.
const MaxLeaseTTL = 24 * time.Hour

// GrantMode says when a node answers a key's checks from tokens granted by
// the key's owner instead of asking the owner each time.
type GrantMode uint8

// Grant modes. The zero value means GrantAuto.
const (
	// GrantAuto uses grants for keys whose checks at a node exceed the
	// node's rate threshold.
	GrantAuto GrantMode = iota
	// GrantAlways uses grants for every key of the limit.
	GrantAlways
	// GrantNever always asks the owner.
	GrantNever
)

var grantModeNames = [...]string{GrantAuto: "auto", GrantAlways: "always", GrantNever: "never"}

// String returns "auto", "always" or "never".
func (g GrantMode) String() string {
	if int(g) < len(grantModeNames) {
		return grantModeNames[g]
	}
	return fmt.Sprintf("grants(%d)", uint8(g))
}

// ParseGrantMode maps "auto", "always" or "never" to a GrantMode; the empty
// string is GrantAuto.
func ParseGrantMode(s string) (GrantMode, error) {
	if s == "" {
		return GrantAuto, nil
	}
	for g, name := range grantModeNames {
		if name == s {
			return GrantMode(g), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown grant mode %s (want auto, always or never)", ErrInvalid, Echo(s))
}
