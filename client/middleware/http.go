package middleware

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/internal/rlheader"
)

// HTTPKeyFunc extracts a request's key for a rule; ok false means the rule
// does not apply to the request (e.g. the header it reads is absent).
type HTTPKeyFunc func(r *http.Request) (key string, ok bool)

// HTTPRule is one limit the HTTP middleware checks for each request: Cost
// units of the key Key extracts, under Policy or Limit.
type HTTPRule struct {
	// Name names the rule: the checked key is Name + ":" + the extracted
	// key, so that rules do not share buckets, and it is the item of the
	// RateLimit headers. Empty means Policy.
	Name string
	// Key extracts the request's key; required.
	Key HTTPKeyFunc
	// Policy names a policy configured on the nodes; when empty, Limit
	// applies (its Limit and Period must be > 0). A policy's period is not
	// known to the client, so its RateLimit-Policy has no w.
	Policy string
	Limit  client.Limit
	// Cost is the units a request spends; 0 means 1.
	Cost int64
	// Estimate, when > 0, makes the rule a reservation for a cost known
	// only after the handler (an LLM call's tokens): Estimate units are
	// reserved before the handler (Cost is ignored), the handler reports
	// the actual cost with ReportCost, and the middleware settles it when
	// the handler returns (see ReportCost).
	Estimate int64
}

// HTTPConfig configures NewHTTP.
type HTTPConfig struct {
	// Client is the Sluice client the checks go through; required.
	Client *client.Client
	// Rules are checked together, in one call, for each request; at least
	// one. A request is denied when any applicable rule denies it; then
	// no rule spends its cost (all or nothing, client.CheckAtomic) unless
	// ChargeEveryRule is set.
	Rules []HTTPRule
	// ChargeEveryRule, when true, has every applicable rule spend its cost
	// even when another denies (one plain Check, which may be answered from
	// the client's local grants). False, the default: the rules of a
	// request with more than one applicable rule are checked all or nothing
	// (client.CheckAtomic, never from grants; across owners only token
	// buckets, fixed and sliding windows, see docs/api.md).
	ChargeEveryRule bool
	// FailMode is what happens to requests Sluice cannot decide; required
	// (FailOpen or FailClosed).
	FailMode FailMode
	// OnError, if set, is called with why Sluice could not decide a
	// request, whatever FailMode did with it. When nil, each such request
	// is logged to Logger, at most one line a second per reason (the
	// error's code and rule) with a count of those not logged: at ERROR
	// for a rule Sluice rejected (ErrRuleRejected), else at WARN.
	OnError func(r *http.Request, err error)
	// Logger is where the default OnError logs; nil means slog.Default().
	Logger *slog.Logger
}

// NewHTTP returns net/http middleware that checks each request against
// cfg.Rules before handing it on.
//
// An allowed request goes on with the RateLimit headers of the most
// restrictive rule set on its response (see internal/rlheader, the format
// of Sluice's HTTP API: RateLimit-Policy and RateLimit from the IETF
// httpapi ratelimit-headers draft, and RateLimit-Limit, -Remaining and
// -Reset). A denied one is answered 429 Too Many Requests with those
// headers and Retry-After, in whole seconds rounded up; the handler is
// not called. When no rule applies (every key function said no), the
// request goes on without headers. A key over Sluice's 1024 bytes is
// answered 400 Bad Request. When Sluice cannot decide, FailOpen lets the
// request through and FailClosed answers 503 Service Unavailable, except
// for a rule Sluice rejects (an unknown policy: ErrRuleRejected), whose
// requests are answered 500 Internal Server Error in either mode. Each
// such request is reported to OnError, or logged (see OnError).
//
// It fails, with an error wrapping ErrConfig, on a nil Client, no rules,
// a rule without Key, Name or a valid Limit, or no FailMode.
func NewHTTP(cfg HTTPConfig) (func(http.Handler) http.Handler, error) {
	l, err := newLimiter(cfg.Client, cfg.FailMode, len(cfg.Rules))
	if err != nil {
		return nil, err
	}
	l.atomic = !cfg.ChargeEveryRule
	keys := make([]HTTPKeyFunc, len(cfg.Rules))
	for i, hr := range cfg.Rules {
		r, err := newRule(i, hr.Name, hr.Policy, hr.Limit, hr.Cost, hr.Key != nil)
		if err == nil && hr.Estimate < 0 {
			err = fmt.Errorf("%w: Rules[%d].Estimate: must not be negative", ErrConfig, i)
		}
		if err != nil {
			return nil, err
		}
		r.estimate = hr.Estimate
		l.rules = append(l.rules, r)
		keys[i] = hr.Key
	}
	onError, el := cfg.OnError, newErrorLog(cfg.Logger)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ks, ok := make([]string, len(keys)), make([]bool, len(keys))
			for i, f := range keys {
				ks[i], ok[i] = f(r)
			}
			d := l.decide(r.Context(), ks, ok)
			if d.badKey != nil {
				http.Error(w, d.badKey.Error(), http.StatusBadRequest)
				return
			}
			switch {
			case d.err == nil:
			case onError != nil:
				onError(r, d.err)
			default:
				el.report(r.Context(), r.Method+" "+r.URL.Path, &d)
			}
			if d.has {
				rlheader.Set(w.Header(), &d.header)
			}
			switch {
			case d.rejected:
				http.Error(w, "rate limiter misconfigured", http.StatusInternalServerError)
			case len(d.denied) > 0:
				http.Error(w, "rate limit exceeded", http.StatusTooManyRequests)
			case !d.allow:
				http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
			case d.resv == nil:
				next.ServeHTTP(w, r)
			default:
				rep := new(costReport)
				next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), costKey{}, rep)))
				if err := l.settle(r.Context(), d.resv, rep); err != nil {
					if onError != nil {
						onError(r, err)
					} else {
						el.report(r.Context(), r.Method+" "+r.URL.Path, &decision{err: err, reason: "settle"})
					}
				}
			}
		})
	}, nil
}

// Header returns a key function whose key is the request's header name
// (its first value); the rule does not apply when it is absent or empty.
func Header(name string) HTTPKeyFunc {
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) (string, bool) {
		v := r.Header.Get(name)
		return v, v != ""
	}
}

// Route returns a key function whose key is the ServeMux pattern the
// request matches, e.g. "GET /users/{id}": r.Pattern when the middleware
// runs inside the mux (set by Go 1.22+ muxes), else the pattern mux would
// route it to, when mux is not nil (the middleware wraps the mux). The
// rule does not apply to a request that matches no pattern.
func Route(mux *http.ServeMux) HTTPKeyFunc {
	return func(r *http.Request) (string, bool) {
		if r.Pattern != "" {
			return r.Pattern, true
		}
		if mux == nil {
			return "", false
		}
		_, p := mux.Handler(r)
		return p, p != ""
	}
}

// JoinHTTP returns a key function whose key is the keys of fs joined by
// sep, e.g. a route and a client IP for a limit per client per route. The
// rule applies only when every one of fs does.
func JoinHTTP(sep string, fs ...HTTPKeyFunc) HTTPKeyFunc {
	return func(r *http.Request) (string, bool) {
		var b strings.Builder
		for i, f := range fs {
			k, ok := f(r)
			if !ok {
				return "", false
			}
			if i > 0 {
				b.WriteString(sep)
			}
			b.WriteString(k)
		}
		return b.String(), len(fs) > 0
	}
}
