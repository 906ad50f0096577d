package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sluice-rl/sluice/internal/wire"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/store"
)

// The admin API over HTTP (see admin.go for who may call it):
//
//	GET  /v1/admin/inspect?key=K&policy=P   (or an inline limit: limit, period, ...)
//	POST /v1/admin/inspect {"key":"user:42","policy":"api"}
//	POST /v1/admin/reset   {"key":"user:42","policy":"api","remaining":5}
//
// A body is one check item without cost (key, and policy or an inline
// limit), and for a reset "remaining" (absent: full). The answer is 200
// with the key's state (wire.KeyInfoJSON); 400 naming the field for bad input;
// 403 without an admin identity; 503 when the key's owner is unreachable.

// adminRequestJSON is the body of /v1/admin/inspect and /v1/admin/reset.
type adminRequestJSON struct {
	checkItemJSON
	Remaining *int64 `json:"remaining"`
}

// adminParams are the query parameters of GET /v1/admin/inspect.
var adminParams = []string{"key", "policy", "limit", "period", "burst", "algorithm", "calendar", "timezone", "failure_mode"}

// keyTime is a KeyInfo instant (unix ns) as a UTC time.
func keyTime(ns int64) time.Time { return time.Unix(0, ns).UTC() }

func toKeyInfoJSON(key string, k *limiter.KeyInfo) *wire.KeyInfoJSON {
	out := &wire.KeyInfoJSON{Key: key, Owner: k.Owner, Policy: k.Policy, Algorithm: k.Algorithm.String(), Limit: k.Limit,
		Remaining: k.Remaining, Used: max(k.Limit-k.Remaining, 0), ResetAfter: k.ResetAfter.String(), Exists: k.Exists,
		Grants: k.Grants, GrantedTokens: k.GrantedTokens, LeaseCount: k.LeaseCount,
		Reservations: k.Reservations, ReservedUnits: k.ReservedUnits, DebtUnits: k.DebtUnits}
	if k.Now != 0 {
		out.ResetAt = keyTime(k.Now).Add(k.ResetAfter).Format(time.RFC3339Nano)
	}
	if k.WindowStart != 0 {
		out.WindowStart = keyTime(k.WindowStart).Format(time.RFC3339Nano)
	}
	for _, le := range k.Leases {
		out.Leases = append(out.Leases, wire.LeaseInfoJSON{Cost: le.Cost, ExpiresAfter: le.ExpiresAfter.String(), Bound: le.Bound})
	}
	return out
}

// decodeAdminBody decodes the body of an admin route into a request and
// the remaining of a reset (limiter.ResetFull when absent). Errors are
// 400s naming the field.
func decodeAdminBody(data []byte, reset bool) (limiter.Request, int64, *httpError) {
	var body adminRequestJSON
	var req limiter.Request
	remaining := int64(limiter.ResetFull)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return req, 0, jsonFieldError(err, "")
	}
	if _, err := dec.Token(); err != io.EOF {
		return req, 0, badRequest("body", "unexpected data after the JSON object")
	}
	if herr := duplicateField(data); herr != nil {
		return req, 0, herr
	}
	if body.Cost != nil {
		return req, 0, badRequest("cost", "admin calls take no cost")
	}
	if herr := body.toRequest(-1, 0, &req); herr != nil {
		return req, 0, herr
	}
	if body.Remaining != nil {
		switch {
		case !reset:
			return req, 0, badRequest("remaining", "only /v1/admin/reset takes it")
		case *body.Remaining < 0:
			return req, 0, badRequest("remaining", fmt.Sprintf("%d: must be >= 0 (omit it for full)", *body.Remaining))
		}
		remaining = *body.Remaining
	}
	return req, remaining, nil
}

// serveAdmin answers /v1/admin/inspect and /v1/admin/reset.
func (a *httpAPI) serveAdmin(w http.ResponseWriter, r *http.Request, reset bool) {
	if a.admin == nil {
		writeError(w, &httpError{status: http.StatusForbidden, msg: msgAdminDisabled})
		return
	}
	method := "Inspect"
	if reset {
		method = "Reset"
	}
	caller, why := a.admin.caller(r.TLS, r.Header.Get("Authorization"))
	if why != "" {
		a.admin.refuse(method, r.RemoteAddr, why)
		writeError(w, &httpError{status: http.StatusForbidden, msg: why})
		return
	}
	var (
		req       limiter.Request
		remaining = int64(limiter.ResetFull)
		herr      *httpError
	)
	if r.Method == http.MethodGet {
		q, herr := parseQuery(r.URL.RawQuery)
		if herr == nil {
			herr = requestFromQuery(q, r.Header, adminParams, 0, &req)
		}
		if herr != nil {
			writeError(w, herr)
			return
		}
	} else {
		if r.URL.RawQuery != "" {
			writeError(w, badRequest("query", "a POST takes its request in the JSON body"))
			return
		}
		body, herr := readBody(w, r, a.maxBody)
		if herr != nil {
			writeError(w, herr)
			return
		}
		req, remaining, herr = decodeAdminBody(body.Bytes(), reset)
		putBuffer(body)
		if herr != nil {
			writeError(w, herr)
			return
		}
	}
	var info limiter.KeyInfo
	var err error
	if reset {
		info, err = a.admin.svc.Reset(r.Context(), req, remaining)
	} else {
		info, err = a.admin.svc.Inspect(r.Context(), req)
	}
	if herr = a.adminError(err); herr != nil {
		writeError(w, herr)
		return
	}
	if reset {
		a.admin.logReset(caller, &req, remaining, &info)
	}
	writeJSON(w, http.StatusOK, toKeyInfoJSON(req.Key, &info))
}

// adminError maps an Inspect or Reset error to an HTTP error (nil for
// none): validation errors name the field, an unreachable owner is 503.
func (a *httpAPI) adminError(err error) *httpError {
	var fe *limiter.FieldError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe):
		return badRequest(fe.Field, fe.Reason)
	case errors.Is(err, limiter.ErrPeerUnavailable):
		return &httpError{status: http.StatusServiceUnavailable, msg: "the key's owner is unreachable: " + err.Error()}
	case errors.Is(err, store.ErrFull):
		return &httpError{status: http.StatusServiceUnavailable, msg: err.Error()}
	}
	return a.checkError(err, true, nil)
}
