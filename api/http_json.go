package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/policy"
)

// Wire types of the HTTP API.

// checkRequestJSON is the body of POST /v1/check.
type checkRequestJSON struct {
	Checks []checkItemJSON `json:"checks"`
	// Atomic: all or nothing (AtomicChecker).
	Atomic bool `json:"atomic"`
}

// checkItemJSON is one check. Pointers tell "absent" from zero: an inline
// field next to a policy is an error, and an absent cost means 1.
type checkItemJSON struct {
	Key         jsonKey `json:"key"`
	Policy      string  `json:"policy"`
	Limit       *int64  `json:"limit"`
	Period      *string `json:"period"`
	Burst       *int64  `json:"burst"`
	Cost        *int64  `json:"cost"`
	Algorithm   *string `json:"algorithm"`
	FailureMode *string `json:"failure_mode"`
	Calendar    *string `json:"calendar"`
	Timezone    *string `json:"timezone"`
}

// checkResponseJSON is the body of a /v1/check answer.
type checkResponseJSON struct {
	Results []resultJSON `json:"results"`
}

// resultJSON is the answer to one check. Durations are Go duration strings
// ("600ms", "1m0s").
type resultJSON struct {
	Allowed    bool           `json:"allowed"`
	Limit      int64          `json:"limit"`
	Remaining  int64          `json:"remaining"`
	ResetAfter string         `json:"reset_after"`
	RetryAfter string         `json:"retry_after"`
	Policy     string         `json:"policy,omitempty"`
	Source     string         `json:"source"`
	Owner      string         `json:"owner,omitempty"`
	Error      *itemErrorJSON `json:"error,omitempty"`
}

// itemErrorJSON describes an item that could not be evaluated.
type itemErrorJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// usageJSON is the body of a /v1/usage answer: a result plus the key and
// the units used (limit - remaining).
type usageJSON struct {
	Key string `json:"key"`
	resultJSON
	Used int64 `json:"used"`
}

// errorJSON is the body of an error answer.
type errorJSON struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

// toResultJSON fills dst from r.
func toResultJSON(dst *resultJSON, r *limiter.Result) {
	*dst = resultJSON{
		Allowed:    r.Allowed,
		Limit:      r.Limit,
		Remaining:  r.Remaining,
		ResetAfter: durationString(r.ResetAfter),
		RetryAfter: durationString(r.RetryAfter),
		Policy:     r.Policy,
		Source:     r.Source.String(),
		Owner:      r.Owner,
	}
	if r.Err != nil {
		dst.Error = &itemErrorJSON{Code: itemErrorCode(r.Err), Message: r.Err.Error()}
	}
}

// durationString is d.String(), without an allocation for 0 (the
// retry_after of every allowed check).
func durationString(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	return d.String()
}

// decodeCheckBody decodes the JSON body of POST /v1/check into limiter
// requests. Errors are 400s that name the offending field
// ("checks[2].period", "body" for malformed JSON).
func decodeCheckBody(data []byte) ([]limiter.Request, *httpError) {
	reqs, _, herr := decodeCheckRequest(data, nil)
	return reqs, herr
}

// decodeCheckRequest is decodeCheckBody that also returns "atomic": the
// fast decoder for the common shape (which has no "atomic"), else
// decodeCheckFull.
func decodeCheckRequest(data []byte, m *checkMemory) ([]limiter.Request, bool, *httpError) {
	if reqs, ok := decodeCheckFast(data, m); ok {
		return reqs, false, nil
	}
	return decodeCheckFull(data)
}

// decodeCheckFull is decodeCheckRequest with encoding/json, for every body.
func decodeCheckFull(data []byte) ([]limiter.Request, bool, *httpError) {
	var body checkRequestJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		// The fast path does not know which item failed; find out.
		return nil, false, diagnoseJSON(data, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false, badRequest("body", "unexpected data after the JSON object")
	}
	if herr := duplicateField(data); herr != nil {
		return nil, false, herr
	}
	switch n := len(body.Checks); {
	case n == 0:
		return nil, false, badRequest("checks", "must hold at least one check")
	case n > limiter.MaxItems:
		return nil, false, badRequest("checks", fmt.Sprintf("%d checks, at most %d per call", n, limiter.MaxItems))
	}
	reqs := make([]limiter.Request, len(body.Checks))
	for i := range body.Checks {
		if herr := body.Checks[i].toRequest(i, 1, &reqs[i]); herr != nil {
			return nil, false, herr
		}
	}
	return reqs, body.Atomic, nil
}

// fieldPath names field of item i of a JSON body, or the query parameter
// field when i < 0.
func fieldPath(i int, field string) string {
	if i < 0 {
		return field
	}
	return "checks[" + strconv.Itoa(i) + "]." + field
}

// toRequest converts a wire check to a limiter request. i is the item's
// index in a JSON body, or -1 for a check from a query string.
func (it *checkItemJSON) toRequest(i int, defaultCost int64, dst *limiter.Request) *httpError {
	if it.Key.invalid {
		return badRequest(fieldPath(i, "key"), "must be valid UTF-8 (the JSON string holds invalid bytes or an unpaired surrogate escape)")
	}
	*dst = limiter.Request{Key: it.Key.s, Policy: it.Policy, Cost: defaultCost}
	if it.Cost != nil {
		dst.Cost = *it.Cost
	}
	inline := it.Limit != nil || it.Period != nil || it.Burst != nil || it.Algorithm != nil || it.FailureMode != nil ||
		it.Calendar != nil || it.Timezone != nil
	if it.Policy != "" {
		if inline {
			return badRequest(fieldPath(i, "policy"), "give either a policy or an inline limit (limit, period, burst, algorithm, failure_mode, calendar, timezone), not both")
		}
		return nil
	}
	if !inline {
		return badRequest(fieldPath(i, "policy"), "name a policy or give an inline limit (limit, period, ...)")
	}
	var alg string
	if it.Algorithm != nil {
		alg = *it.Algorithm
	}
	a, err := bucket.ParseAlgorithm(alg)
	if err != nil {
		return badRequest(fieldPath(i, "algorithm"),
			fmt.Sprintf("unknown algorithm %s (want token_bucket, sliding_window, fixed_window, sliding_log, concurrency or fixed_window_hits)", quoteShort(alg)))
	}
	dst.Limit.Algorithm = a
	if it.Limit != nil {
		dst.Limit.Limit = *it.Limit
	}
	if it.Burst != nil {
		dst.Limit.Burst = *it.Burst
	}
	if it.Period != nil {
		d, err := policy.ParseDuration(*it.Period)
		if err != nil {
			return badRequest(fieldPath(i, "period"),
				fmt.Sprintf("invalid duration %s: want e.g. 500ms, 1m, 1h30m or 7d", quoteShort(*it.Period)))
		}
		dst.Limit.Period = d
	}
	if it.Calendar != nil {
		c, err := bucket.ParseCalendar(*it.Calendar)
		if err != nil || c == bucket.NoCalendar {
			return badRequest(fieldPath(i, "calendar"),
				fmt.Sprintf("unknown calendar %s (want day, week, month or year)", quoteShort(*it.Calendar)))
		}
		dst.Limit.Calendar = c
	}
	if it.Timezone != nil {
		if *it.Timezone == "" {
			return badRequest(fieldPath(i, "timezone"), "must not be empty: omit it for UTC")
		}
		dst.Timezone = *it.Timezone // the limiter loads it, or names the field
	}
	if it.FailureMode != nil {
		m, err := policy.ParseFailureMode(*it.FailureMode)
		if err != nil {
			return badRequest(fieldPath(i, "failure_mode"),
				fmt.Sprintf("unknown failure mode %s (want local, deny or allow)", quoteShort(*it.FailureMode)))
		}
		dst.FailureMode = m
	}
	return nil
}

// quoteShort quotes s, a client's input, for an error message: at most
// policy.MaxEcho bytes of it (policy.Echo).
func quoteShort(s string) string { return policy.Echo(s) }

// diagnoseJSON turns the error of the one-pass decode into a 400 naming
// the field. It decodes again, item by item, to learn which item failed.
func diagnoseJSON(data []byte, first error) *httpError {
	if herr := jsonSyntaxError(first); herr != nil {
		return herr
	}
	var top struct {
		Checks []json.RawMessage `json:"checks"`
		Atomic bool              `json:"atomic"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&top); err != nil {
		return jsonFieldError(err, "")
	}
	for i, raw := range top.Checks {
		var it checkItemJSON
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(&it); err != nil {
			return jsonFieldError(err, "checks["+strconv.Itoa(i)+"]")
		}
	}
	return badRequest("body", strings.TrimPrefix(first.Error(), "json: "))
}

// jsonSyntaxError maps malformed JSON to a 400 naming "body"; nil if err
// is not about syntax.
func jsonSyntaxError(err error) *httpError {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return badRequest("body", fmt.Sprintf("malformed JSON at offset %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: ")))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return badRequest("body", "malformed JSON: unexpected end of input")
	}
	return nil
}

// jsonFieldError maps a decoding error inside the value at path prefix
// ("" for the top level, "checks[3]" for an item) to a 400.
func jsonFieldError(err error, prefix string) *httpError {
	if herr := jsonSyntaxError(err); herr != nil {
		return herr
	}
	join := func(field string) string {
		switch {
		case prefix == "" && field == "":
			return "body"
		case prefix == "":
			return field
		case field == "":
			return prefix
		}
		return prefix + "." + field
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return badRequest(join(te.Field), fmt.Sprintf("must be %s, not %s", describeType(te.Type), te.Value))
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		if n, err := strconv.Unquote(name); err == nil {
			name = n
		}
		return badRequest(join(shortField(name)), "unknown field")
	}
	return badRequest(join(""), strings.TrimPrefix(msg, "json: "))
}

// describeType names the JSON shape a Go type expects.
func describeType(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.String:
		return "a string"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Bool:
		return "true or false"
	}
	return t.String()
}

// Query-string checks.

// The parameters each kind of query-string request accepts.
var (
	checkParams     = []string{"key", "key_header", "policy", "limit", "period", "burst", "algorithm", "calendar", "timezone", "cost", "failure_mode", "deny_status"}
	usageParams     = []string{"key", "key_header", "policy", "limit", "period", "burst", "algorithm", "calendar", "timezone", "failure_mode"}
	checkBodyParams = []string{"deny_status"}
)

// parseQuery parses a raw query string.
func parseQuery(raw string) (url.Values, *httpError) {
	if raw == "" {
		return nil, nil // (a body's check has none: no map to allocate; q is only read)
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, badRequest("query", err.Error())
	}
	return q, nil
}

// onlyParams checks that q holds only allowed parameters, each once.
func onlyParams(q url.Values, allowed []string) *httpError {
	var unknown []string
	for k, v := range q {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
		} else if len(v) > 1 {
			return badRequest(k, "given more than once")
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		name := unknown[0]
		if name == "" {
			return badRequest("query", `a parameter with no name (as in "?=1" or "&&")`)
		}
		return badRequest(shortField(name), fmt.Sprintf("unknown parameter (want %s)", strings.Join(allowed, ", ")))
	}
	return nil
}

// requestFromQuery builds one request from a query string; hdr supplies the
// key when key_header names a header.
func requestFromQuery(q url.Values, hdr http.Header, allowed []string, defaultCost int64, dst *limiter.Request) *httpError {
	if herr := onlyParams(q, allowed); herr != nil {
		return herr
	}
	it := checkItemJSON{Key: jsonKey{s: q.Get("key")}, Policy: q.Get("policy")}
	if q.Has("key") && q.Has("key_header") {
		return badRequest("key_header", "give either key or key_header, not both")
	}
	if it.Key.s == "" {
		name := q.Get("key_header")
		if name == "" {
			return badRequest("key", "required (or name a request header to take it from with key_header)")
		}
		v := hdr.Get(name)
		if c := strings.IndexByte(v, ','); c >= 0 {
			v = v[:c]
		}
		if v = strings.TrimSpace(v); v == "" {
			return badRequest("key_header", fmt.Sprintf("request header %s is missing or empty", quoteShort(name)))
		}
		it.Key = jsonKey{s: v}
	}
	for _, p := range [...]struct {
		name string
		dst  **int64
	}{{"limit", &it.Limit}, {"burst", &it.Burst}, {"cost", &it.Cost}} {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return badRequest(p.name, fmt.Sprintf("must be an integer, not %s", quoteShort(v)))
		}
		*p.dst = &n
	}
	for _, p := range [...]struct {
		name string
		dst  **string
	}{{"period", &it.Period}, {"algorithm", &it.Algorithm}, {"failure_mode", &it.FailureMode}, {"calendar", &it.Calendar}, {"timezone", &it.Timezone}} {
		if v := q.Get(p.name); v != "" {
			*p.dst = &v
		}
	}
	return it.toRequest(-1, defaultCost, dst)
}

// parseDenyStatus reads deny_status: the status of a deny, 429 by default.
func parseDenyStatus(q url.Values) (int, *httpError) {
	switch v := q.Get("deny_status"); v {
	case "":
		return http.StatusTooManyRequests, nil
	case "401", "403", "429":
		n, _ := strconv.Atoi(v)
		return n, nil
	default:
		return 0, badRequest("deny_status", fmt.Sprintf("must be 401, 403 or 429, not %s", quoteShort(v)))
	}
}

// jsonKey is the key of a check in a JSON body. encoding/json decodes
// invalid UTF-8 and unpaired surrogate escapes ("\udc80") into U+FFFD, so
// that distinct byte keys would share one bucket; a jsonKey remembers that
// its JSON string was not valid text, and the check is refused. (Keys from
// a query string or a header are checked by the limiter.)
type jsonKey struct {
	s       string
	invalid bool
}

// UnmarshalJSON decodes a JSON string, noting whether it was valid text:
// its bytes valid UTF-8, and no U+FFFD in the result that the text did not
// spell (literally or as \ufffd).
func (k *jsonKey) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &k.s); err != nil {
		return err
	}
	if !utf8.Valid(b) {
		k.invalid = true
	} else if n := strings.Count(k.s, "\uFFFD"); n > 0 {
		k.invalid = n > bytes.Count(b, []byte("\uFFFD"))+countFold(b, `\ufffd`)
	}
	return nil
}

// countFold counts the ASCII case-insensitive occurrences of sub in b.
func countFold(b []byte, sub string) int {
	n := 0
	for i := 0; i+len(sub) <= len(b); i++ {
		if b[i] == '\\' && strings.EqualFold(string(b[i:i+len(sub)]), sub) {
			n++
		}
	}
	return n
}
