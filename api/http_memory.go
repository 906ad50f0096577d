package api

import "github.com/sluice-rl/sluice/limiter"

// checkMemory is the memory of one /v1/check, pooled per API
// (checkMemory, releaseCheckMemory): the fast decoder's values and
// requests, the limiter's results and the answer's JSON form, so that a
// check of a few items allocates none of them. The strings the decoder
// keeps (itemValues) are those of the last body decoded into it.
type checkMemory struct {
	vals    [4]itemValues
	reqs    []limiter.Request
	results []limiter.Result
	resp    checkResponseJSON
}

// maxPooledCheck is the most items of a check whose memory is pooled.
const maxPooledCheck = 64

// checkMemory returns memory for a check from the pool.
func (a *httpAPI) checkMemory() *checkMemory {
	m, _ := a.checks.Get().(*checkMemory)
	if m == nil {
		m = new(checkMemory)
	}
	return m
}

// releaseCheckMemory returns m to the pool once the answer is written.
func (a *httpAPI) releaseCheckMemory(m *checkMemory) {
	if cap(m.reqs) > maxPooledCheck || cap(m.results) > maxPooledCheck || cap(m.resp.Results) > maxPooledCheck {
		return
	}
	clear(m.reqs[:cap(m.reqs)]) // pin no keys, owners or errors
	clear(m.results[:cap(m.results)])
	clear(m.resp.Results[:cap(m.resp.Results)])
	m.reqs, m.results, m.resp.Results = m.reqs[:0], m.results[:0], m.resp.Results[:0]
	a.checks.Put(m)
}
