package middleware

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/internal/rlheader"
)

// ErrConfig is wrapped by the errors of the constructors: the
// configuration they were given cannot work.
var ErrConfig = errors.New("middleware: invalid configuration")

// ErrKeyTooLong is wrapped by the error a request gets when a key function
// made a key longer than Sluice accepts (1024 bytes with the rule's
// prefix): the request is refused as bad input (HTTP 400, gRPC
// InvalidArgument) rather than checked under another key or let through.
var ErrKeyTooLong = errors.New("middleware: key too long")

// ErrBadKey is wrapped by the error a request gets when a key function
// made a key that is not valid UTF-8, which Sluice refuses: the request is
// refused as bad input, as for ErrKeyTooLong.
var ErrBadKey = errors.New("middleware: key not valid UTF-8")

// ErrRuleRejected is wrapped by the error reported when Sluice refused a
// rule as the middleware sent it: a policy the nodes do not have, an
// inline limit where the nodes' policy file disables them, a cost above a
// policy's capacity. That is the service's configuration, not an outage,
// so FailMode does not apply: the request is refused (HTTP 500, gRPC
// Internal) and the error logged at ERROR, never let through in silence.
var ErrRuleRejected = errors.New("middleware: Sluice rejected a rule")

// maxKeyBytes is the server's bound on a key (limiter.MaxKeyBytes).
const maxKeyBytes = 1024

// FailMode says what the middleware does with a request when Sluice
// cannot decide it: the nodes are unreachable or the call timed out, or a
// node could not evaluate a rule's item (e.g. an unknown policy, a full
// store). There is no default: the zero value is refused by the
// constructors, so each service chooses. Either way a request waits for
// Sluice at most its context's deadline or, without one, the client's
// Config.Timeout (2s by default): set it to what a request may spend.
type FailMode int

// The failure modes.
const (
	// FailOpen lets the request through, with the RateLimit headers of
	// the rules that were decided, if any.
	FailOpen FailMode = iota + 1
	// FailClosed refuses the request: HTTP 503 Service Unavailable, gRPC
	// Unavailable.
	FailClosed
)

// rule is a checked, prefixed rule of either kind.
type rule struct {
	name   string // also the key's prefix, name + ":"
	policy string
	limit  client.Limit
	cost   int64
	// estimate > 0 makes the rule a reservation (HTTPRule.Estimate).
	estimate int64
}

// newRule checks a rule's quota; i numbers it in errors.
func newRule(i int, name, policy string, limit client.Limit, cost int64, hasKey bool) (rule, error) {
	field := fmt.Sprintf("Rules[%d]", i)
	if name == "" {
		name = policy
	}
	switch {
	case !hasKey:
		return rule{}, fmt.Errorf("%w: %s.Key: required", ErrConfig, field)
	case name == "":
		return rule{}, fmt.Errorf("%w: %s.Name: required when there is no Policy", ErrConfig, field)
	case len(name)+1 >= maxKeyBytes:
		return rule{}, fmt.Errorf("%w: %s.Name: %d bytes, too long for a key prefix", ErrConfig, field, len(name))
	case cost < 0:
		return rule{}, fmt.Errorf("%w: %s.Cost: must not be negative", ErrConfig, field)
	case limit.Algorithm == client.Concurrency:
		return rule{}, fmt.Errorf("%w: %s.Limit.Algorithm: concurrency limits are held with Acquire and Release, not checked per request", ErrConfig, field)
	case policy == "" && (limit.Limit <= 0 || limit.Period <= 0 && limit.Calendar == client.Calendar(0)):
		return rule{}, fmt.Errorf("%w: %s.Limit: Limit and Period (or a Calendar) must be > 0 when there is no Policy", ErrConfig, field)
	}
	return rule{name: name, policy: policy, limit: limit, cost: cost}, nil
}

// limiter decides requests for the HTTP and gRPC middleware.
type limiter struct {
	client *client.Client
	rules  []rule
	fail   FailMode
	// atomic checks a request's rules all or nothing (not ChargeEveryRule).
	atomic bool
}

func newLimiter(c *client.Client, fail FailMode, nrules int) (*limiter, error) {
	switch {
	case c == nil:
		return nil, fmt.Errorf("%w: Client: required", ErrConfig)
	case nrules == 0:
		return nil, fmt.Errorf("%w: Rules: at least one is required", ErrConfig)
	case nrules > 1000:
		return nil, fmt.Errorf("%w: Rules: %d, at most 1000 (one call's items)", ErrConfig, nrules)
	case fail != FailOpen && fail != FailClosed:
		return nil, fmt.Errorf("%w: FailMode: required, FailOpen or FailClosed", ErrConfig)
	}
	return &limiter{client: c, fail: fail, rules: make([]rule, 0, nrules)}, nil
}

// decision is the outcome of a request's check.
type decision struct {
	// allow says whether the request goes on.
	allow bool
	// header describes the most restrictive decided item; valid if has.
	header rlheader.Item
	has    bool
	// denied are the keys of the denied rules and their rule names.
	denied []deniedItem
	// err is why Sluice could not decide, on a pass in FailOpen or a
	// refusal in FailClosed; nil when it decided everything.
	err error
	// badKey is set when a key was too long or not UTF-8: the request is
	// refused as bad input.
	badKey error
	// rejected is set when Sluice refused a rule (err wraps
	// ErrRuleRejected): the request is refused whatever the FailMode.
	rejected bool
	// reason classifies err for the default OnError's rate limit.
	reason string
	// resv is the request's reservation, to settle after the handler;
	// nil when no reserving rule applied or the request does not go on.
	resv *client.Reservation
}

// failed is the decision when Sluice could not decide: err says why. An
// InvalidArgument answer is a rule Sluice refused (the middleware checks
// keys itself, so the rest of what it sends is the service's
// configuration); anything else is Sluice being unavailable, decided by
// the FailMode.
func (l *limiter) failed(rule string, err error) decision {
	code := status.Code(err)
	if code == codes.InvalidArgument {
		err = fmt.Errorf("%w: %w", ErrRuleRejected, err)
		if rule != "" {
			err = fmt.Errorf("middleware: rule %q: %w", rule, err)
		}
		return decision{rejected: true, err: err, reason: "rejected " + rule}
	}
	if rule != "" {
		err = fmt.Errorf("middleware: rule %q: %w", rule, err)
	} else {
		err = fmt.Errorf("middleware: %w", err)
	}
	return decision{allow: l.fail == FailOpen, err: err, reason: code.String() + " " + rule}
}

// level is the level the default OnError logs a decision's error at.
func (d *decision) level() slog.Level {
	if d.rejected {
		return slog.LevelError
	}
	return slog.LevelWarn
}

// action says what was done with a request Sluice could not decide.
func (d *decision) action() string {
	switch {
	case d.rejected:
		return "refused: the rule is misconfigured"
	case d.allow:
		return "let through (FailOpen)"
	}
	return "refused (FailClosed)"
}

// deniedItem is one denied rule's key.
type deniedItem struct{ rule, key string }

// decide checks keys[i] under rules[i], all in one call; keys[i] is
// skipped when !ok[i]. No rule applying lets the request through without
// headers.
func (l *limiter) decide(ctx context.Context, keys []string, ok []bool) decision {
	items := make([]client.Item, 0, len(keys))
	idx := make([]int, 0, len(keys))
	var ritems []client.ReserveItem
	var ridx []int
	for i, k := range keys {
		if !ok[i] {
			continue
		}
		r := &l.rules[i]
		key := r.name + ":" + k
		if len(key) > maxKeyBytes {
			return decision{badKey: fmt.Errorf("%w: rule %q: %d bytes, at most %d", ErrKeyTooLong, r.name, len(key), maxKeyBytes)}
		}
		if !utf8.ValidString(key) {
			return decision{badKey: fmt.Errorf("%w: rule %q: not valid UTF-8", ErrBadKey, r.name)}
		}
		if r.estimate > 0 {
			ritems = append(ritems, client.ReserveItem{Key: key, Policy: r.policy, Limit: r.limit, Estimate: r.estimate})
			ridx = append(ridx, i)
			continue
		}
		items = append(items, client.Item{Key: key, Policy: r.policy, Limit: r.limit, Cost: r.cost})
		idx = append(idx, i)
	}
	d := decision{allow: true}
	if len(ritems) > 0 {
		if d = l.reserve(ctx, ritems, ridx); !d.allow || len(items) == 0 {
			return d
		}
	}
	if len(items) == 0 {
		return d
	}
	var res []client.Result
	var err error
	if l.atomic && len(items) > 1 {
		res, err = l.client.CheckAtomic(ctx, items...)
	} else {
		res, err = l.client.Check(ctx, items...)
	}
	if err != nil {
		l.cancel(ctx, &d)
		return l.failed("", err)
	}
	var failed *decision
	for j := range res {
		r, rl := &res[j], &l.rules[idx[j]]
		if r.Err != nil {
			if f := l.failed(rl.name, r.Err); failed == nil || f.rejected && !failed.rejected {
				failed = &f
			}
			continue
		}
		// An all-or-nothing call denies every item when one is denied;
		// an item that had room (no retry, enough left) is not a
		// violation of its own rule.
		own := r.Allowed || l.atomic && len(items) > 1 && r.RetryAfter == 0 && r.Remaining >= max(items[j].Cost, 1)
		it := rlheader.Item{Name: rl.name, Allowed: own, Limit: r.Limit, Remaining: r.Remaining,
			ResetAfter: r.ResetAfter, RetryAfter: r.RetryAfter}
		d.add(rl, it)
		if !r.Allowed {
			d.allow = false
		}
		if !own {
			d.denied = append(d.denied, deniedItem{rule: rl.name, key: items[j].Key})
		}
	}
	if failed != nil {
		d.err, d.rejected, d.reason = failed.err, failed.rejected, failed.reason
		if d.rejected || l.fail == FailClosed {
			d.allow = false
		}
	}
	if !d.allow {
		l.cancel(ctx, &d)
	}
	return d
}

// add counts an item of rule rl in the decision's headers.
func (d *decision) add(rl *rule, it rlheader.Item) {
	if rl.policy == "" {
		// The rule's own limit: the quota and burst the headers
		// advertise (the answer's Limit is the capacity).
		it.Period = rl.limit.Period
		it.Limit = rl.limit.Limit
		if rl.limit.Burst > 0 && rl.limit.Burst != rl.limit.Limit {
			it.Burst = rl.limit.Burst
		}
	}
	if !d.has || rlheader.MoreRestrictive(&it, &d.header) {
		d.header, d.has = it, true
	}
}
