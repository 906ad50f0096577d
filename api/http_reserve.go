package api

// The HTTP routes of reserve and settle:
//
//	POST /v1/reserve  {"items":[{"key":"tenant:7","policy":"tpm","estimate":1200}, ...], "ttl":"2m"}
//	POST /v1/settle   {"items":[{"key":"tenant:7","policy":"tpm","reservation_id":"…","actual":950}, ...]}
//
// A reserve is all or nothing (see limiter.ReserveAll): 200 when every
// item was reserved, 429 when one was denied (nothing stays reserved; the
// RateLimit headers and Retry-After describe the denied item), 503 when
// one could not be evaluated. A settle is 200 (a second settle of an ID
// answers the first's figures with "already_settled": true), 404 naming
// items[i].reservation_id for an unknown ID. Invalid input is a 400 naming
// the field.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/policy"
)

// reserveRequestJSON is the body of POST /v1/reserve.
type reserveRequestJSON struct {
	Items []reserveItemJSON `json:"items"`
	// TTL is how long each reservation waits for its settle; a duration
	// string, absent for the default (1m).
	TTL *string `json:"ttl"`
}

// reserveItemJSON is a check item (without cost) and its estimate.
type reserveItemJSON struct {
	checkItemJSON
	Estimate *int64 `json:"estimate"`
}

// settleRequestJSON is the body of POST /v1/settle.
type settleRequestJSON struct {
	Items []settleItemJSON `json:"items"`
}

// settleItemJSON is a check item (without cost), its reservation and the
// actual cost.
type settleItemJSON struct {
	checkItemJSON
	ReservationID *string `json:"reservation_id"`
	Actual        *int64  `json:"actual"`
}

// reserveResponseJSON is the body of a /v1/reserve answer.
type reserveResponseJSON struct {
	Allowed bool                `json:"allowed"`
	Results []reserveResultJSON `json:"results"`
}

type reserveResultJSON struct {
	resultJSON
	ReservationID string `json:"reservation_id,omitempty"`
	ExpiresAfter  string `json:"expires_after,omitempty"`
}

// settleResponseJSON is the body of a /v1/settle answer.
type settleResponseJSON struct {
	Results []settleResultJSON `json:"results"`
}

type settleResultJSON struct {
	AlreadySettled bool   `json:"already_settled"`
	Estimate       int64  `json:"estimate"`
	Actual         int64  `json:"actual"`
	Refunded       int64  `json:"refunded"`
	Charged        int64  `json:"charged"`
	Forgiven       int64  `json:"forgiven"`
	Limit          int64  `json:"limit"`
	Remaining      int64  `json:"remaining"`
	ResetAfter     string `json:"reset_after"`
	Owner          string `json:"owner,omitempty"`
}

// itemsPath names field of item i of a reserve or settle body.
func itemsPath(i int, field string) string { return "items[" + strconv.Itoa(i) + "]." + field }

// decodeItems decodes a reserve or settle body into v, strictly, and
// checks its item count n(v). item returns a new item of v's kind, to
// name the item that failed to decode.
func decodeItems(data []byte, v any, n func() int, item func() any) *httpError {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if herr := jsonSyntaxError(err); herr != nil {
			return herr
		}
		var top struct {
			Items []json.RawMessage `json:"items"`
			TTL   *string           `json:"ttl"`
		}
		d := json.NewDecoder(bytes.NewReader(data))
		d.DisallowUnknownFields()
		if err := d.Decode(&top); err != nil {
			return jsonFieldError(err, "")
		}
		if _, settle := v.(*settleRequestJSON); settle && top.TTL != nil {
			return badRequest("ttl", "unknown field: a settle has no ttl")
		}
		for i, raw := range top.Items {
			d := json.NewDecoder(bytes.NewReader(raw))
			d.DisallowUnknownFields()
			if err := d.Decode(item()); err != nil {
				return jsonFieldError(err, "items["+strconv.Itoa(i)+"]")
			}
		}
		return badRequest("body", err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("body", "unexpected data after the JSON object")
	}
	if herr := duplicateField(data); herr != nil {
		return herr
	}
	switch c := n(); {
	case c == 0:
		return badRequest("items", "must hold at least one item")
	case c > limiter.MaxItems:
		return badRequest("items", fmt.Sprintf("%d items, at most %d per call", c, limiter.MaxItems))
	}
	return nil
}

// itemRequest converts item i's check fields, naming fields under items[i].
func itemRequest(i int, it *checkItemJSON, dst *limiter.Request) *httpError {
	if it.Cost != nil {
		return badRequest(itemsPath(i, "cost"), "not used here: give estimate (reserve) or actual (settle)")
	}
	if herr := it.toRequest(-1, 0, dst); herr != nil {
		herr.field = itemsPath(i, herr.field)
		herr.msg = "items[" + strconv.Itoa(i) + "]." + herr.msg
		return herr
	}
	return nil
}

// reserveHTTPError maps an error of ReserveAll or SettleAll to an HTTP
// error: a field of an item is named under items[i] ("ttl" and "items"
// are the request's own).
func (a *httpAPI) reserveHTTPError(err error) *httpError {
	var fe *limiter.FieldError
	if errors.As(err, &fe) {
		field := fe.Field
		if field != "ttl" && fe.Index >= 0 {
			field = itemsPath(fe.Index, field)
		}
		if errors.Is(err, limiter.ErrUnknownReservation) {
			return &httpError{status: http.StatusNotFound, field: field, msg: field + ": " + fe.Reason}
		}
		return badRequest(field, fe.Reason)
	}
	return a.checkError(err, false, nil)
}

func (a *httpAPI) serveReserve(w http.ResponseWriter, r *http.Request) {
	rs, ok := a.checker.(Reserver)
	if !ok {
		writeError(w, &httpError{status: http.StatusNotFound, msg: "reservations are not served here"})
		return
	}
	body, herr := readBody(w, r, a.maxBody)
	if herr != nil {
		writeError(w, herr)
		return
	}
	defer putBuffer(body)
	var in reserveRequestJSON
	if herr := decodeItems(body.Bytes(), &in, func() int { return len(in.Items) }, func() any { return new(reserveItemJSON) }); herr != nil {
		writeError(w, herr)
		return
	}
	var ttl int64
	if in.TTL != nil {
		d, err := policy.ParseDuration(*in.TTL)
		if err != nil {
			writeError(w, badRequest("ttl", fmt.Sprintf("invalid duration %s: want e.g. 30s or 2m", quoteShort(*in.TTL))))
			return
		}
		if d <= 0 {
			writeError(w, badRequest("ttl", "must be > 0 (omit it for the default)"))
			return
		}
		ttl = int64(d)
	}
	holder := tlsHolder(r.TLS)
	reqs := make([]limiter.ReserveRequest, len(in.Items))
	for i := range in.Items {
		it := &in.Items[i]
		if herr := itemRequest(i, &it.checkItemJSON, &reqs[i].Request); herr != nil {
			writeError(w, herr)
			return
		}
		if it.Estimate == nil {
			writeError(w, badRequest(itemsPath(i, "estimate"), "is required"))
			return
		}
		reqs[i].Estimate, reqs[i].Holder, reqs[i].Client = *it.Estimate, holder, holder
		reqs[i].TTL = time.Duration(ttl)
	}
	out, all, err := rs.ReserveAll(r.Context(), reqs)
	if err != nil {
		writeError(w, a.reserveHTTPError(err))
		return
	}
	status := http.StatusOK
	results := make([]limiter.Result, len(out))
	resp := reserveResponseJSON{Allowed: all, Results: make([]reserveResultJSON, len(in.Items))}
	for i := range out {
		results[i] = out[i].Result
		toResultJSON(&resp.Results[i].resultJSON, &out[i].Result)
		resp.Results[i].ReservationID = out[i].ID
		if out[i].ID != "" {
			resp.Results[i].ExpiresAfter = out[i].ExpiresAfter.String()
		}
		switch {
		case out[i].Err != nil:
			status = http.StatusServiceUnavailable
		case !out[i].Allowed && status == http.StatusOK:
			status = http.StatusTooManyRequests
		}
	}
	for i := len(out); i < len(in.Items); i++ {
		resp.Results[i].Source = "none" // not tried: an earlier item was denied
		resp.Results[i].ResetAfter, resp.Results[i].RetryAfter = "0s", "0s"
	}
	setRateLimitHeaders(w.Header(), results)
	writeJSON(w, status, &resp)
}

func (a *httpAPI) serveSettle(w http.ResponseWriter, r *http.Request) {
	rs, ok := a.checker.(Reserver)
	if !ok {
		writeError(w, &httpError{status: http.StatusNotFound, msg: "reservations are not served here"})
		return
	}
	body, herr := readBody(w, r, a.maxBody)
	if herr != nil {
		writeError(w, herr)
		return
	}
	defer putBuffer(body)
	var in settleRequestJSON
	if herr := decodeItems(body.Bytes(), &in, func() int { return len(in.Items) }, func() any { return new(settleItemJSON) }); herr != nil {
		writeError(w, herr)
		return
	}
	holder := tlsHolder(r.TLS)
	reqs := make([]limiter.SettleRequest, len(in.Items))
	for i := range in.Items {
		it := &in.Items[i]
		if herr := itemRequest(i, &it.checkItemJSON, &reqs[i].Request); herr != nil {
			writeError(w, herr)
			return
		}
		switch {
		case it.ReservationID == nil || *it.ReservationID == "":
			writeError(w, badRequest(itemsPath(i, "reservation_id"), "is required"))
			return
		case it.Actual == nil:
			writeError(w, badRequest(itemsPath(i, "actual"), "is required"))
			return
		}
		reqs[i].ID, reqs[i].Actual, reqs[i].Holder = *it.ReservationID, *it.Actual, holder
	}
	out, err := rs.SettleAll(r.Context(), reqs)
	if err != nil {
		writeError(w, a.reserveHTTPError(err))
		return
	}
	resp := settleResponseJSON{Results: make([]settleResultJSON, len(out))}
	for i := range out {
		st := &out[i]
		if st.Err != nil {
			writeError(w, &httpError{status: http.StatusServiceUnavailable, field: itemsPath(i, "key"),
				msg: fmt.Sprintf("items[%d]: %v", i, st.Err)})
			return
		}
		resp.Results[i] = settleResultJSON{
			AlreadySettled: st.Already, Estimate: st.Estimate, Actual: st.Actual,
			Refunded: st.Refunded, Charged: st.Charged, Forgiven: st.Forgiven,
			Limit: st.Limit, Remaining: st.Remaining, ResetAfter: st.ResetAfter.String(), Owner: st.Owner,
		}
	}
	writeJSON(w, http.StatusOK, &resp)
}
