package api

// POST /json: envoyproxy/ratelimit's HTTP form of ShouldRateLimit, for
// callers that cannot speak gRPC (a shell, a Lua script). The body is the
// protobuf JSON of an envoy.service.ratelimit.v3.RateLimitRequest, the
// answer the protobuf JSON of its RateLimitResponse, from the same RLS the
// gRPC port serves:
//
//	curl -s localhost:8080/json -d '{"domain":"web","descriptors":[{"entries":[{"key":"user","value":"ann"}]}]}'
//
// Status: 200 when the overall code is OK, 429 when OVER_LIMIT, 500 when
// UNKNOWN, as the reference answers. A body that is not such JSON (an
// unknown field, a wrong type, trailing data) or a request the RLS refuses
// as invalid is a 400 whose JSON body names the field, as every 400 of this
// API ({"error":"...","field":"body"}; the reference answers a plain-text
// 400); any other failure of the RLS (the node's store full, the owner
// unreachable with no fallback) is a 503 with a JSON error.

import (
	"context"
	"encoding/json"
	"net/http"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// RateLimitServer is what POST /json needs of the Envoy RLS (*RLS
// satisfies it).
type RateLimitServer interface {
	ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error)
}

// serveRLSJSON answers POST /json.
func (a *httpAPI) serveRLSJSON(w http.ResponseWriter, r *http.Request) {
	if a.rls == nil {
		writeError(w, &httpError{status: http.StatusNotFound, msg: "the Envoy rate limit service is not enabled"})
		return
	}
	body, herr := readBody(w, r, a.maxBody)
	if herr != nil {
		writeError(w, herr)
		return
	}
	var req rlsv3.RateLimitRequest
	err := protojson.Unmarshal(body.Bytes(), &req)
	putBuffer(body)
	if err != nil {
		writeError(w, badRequest("body", "not a RateLimitRequest in JSON: "+err.Error()))
		return
	}
	resp, err := a.rls.ShouldRateLimit(r.Context(), &req)
	if err != nil {
		writeError(w, rlsHTTPError(err))
		return
	}
	b, err := protojson.Marshal(resp)
	if err != nil {
		a.log.Error("http: encoding a RateLimitResponse", "err", err)
		writeError(w, &httpError{status: http.StatusInternalServerError, msg: "internal error"})
		return
	}
	// protojson varies its spacing on purpose; the answer is compact, so
	// that the same response has the same bytes.
	out := getBuffer()
	defer putBuffer(out)
	if err := json.Compact(out, b); err != nil {
		a.log.Error("http: compacting a RateLimitResponse", "err", err)
		writeError(w, &httpError{status: http.StatusInternalServerError, msg: "internal error"})
		return
	}
	code := http.StatusOK
	switch resp.GetOverallCode() {
	case rlsv3.RateLimitResponse_OVER_LIMIT:
		code = http.StatusTooManyRequests
	case rlsv3.RateLimitResponse_UNKNOWN:
		code = http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(out.Bytes())
}

// rlsHTTPError maps an error of ShouldRateLimit to an HTTP error: one that
// names a field (a BadRequest detail) or is InvalidArgument is a 400, with
// the field; anything else a 503.
func rlsHTTPError(err error) *httpError {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			v := br.GetFieldViolations()[0]
			return badRequest(v.GetField(), v.GetDescription())
		}
	}
	if st.Code() == codes.InvalidArgument {
		return &httpError{status: http.StatusBadRequest, field: "body", msg: st.Message()}
	}
	return &httpError{status: http.StatusServiceUnavailable, msg: st.Message()}
}
