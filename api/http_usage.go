package api

import (
	"net/http"

	"github.com/sluice-rl/sluice/limiter"
)

// serveUsage answers /v1/usage: a cost-0 check described by the query
// string. It never consumes, so a deny cannot happen and the answer is 200
// (or 503 when the item could not be evaluated). Its "allowed" says whether
// a check of cost 1 would be allowed now (remaining >= 1): the read itself
// always is, which tells a caller nothing.
func (a *httpAPI) serveUsage(w http.ResponseWriter, r *http.Request) {
	q, herr := parseQuery(r.URL.RawQuery)
	if herr != nil {
		writeError(w, herr)
		return
	}
	reqs := make([]limiter.Request, 1)
	if herr := requestFromQuery(q, r.Header, usageParams, 0, &reqs[0]); herr != nil {
		writeError(w, herr)
		return
	}
	results, err := a.checker.Check(r.Context(), reqs, make([]limiter.Result, 0, 1))
	if err != nil {
		writeError(w, a.checkError(err, true, q))
		return
	}
	if len(results) != 1 {
		a.log.Error("http: checker returned the wrong number of results", "want", 1, "got", len(results))
		writeError(w, &httpError{status: http.StatusInternalServerError, msg: "internal error"})
		return
	}
	res := &results[0]
	status := http.StatusOK
	if res.Err != nil {
		status = http.StatusServiceUnavailable
	}
	setRateLimitHeaders(w.Header(), results)
	out := usageJSON{Key: reqs[0].Key}
	toResultJSON(&out.resultJSON, res)
	if res.Err == nil {
		out.Used = max(res.Limit-res.Remaining, 0)
		out.Allowed = res.Remaining >= 1
	}
	writeJSON(w, status, &out)
}
