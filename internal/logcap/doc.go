// Package logcap caps the log lines an attacker can cause: a slog.Handler
// wrapper that lets at most one line a second through per reason (a
// record's message) for records at WARN and above, and for any record
// marked as a refusal (an attribute Refusal set true), and counts every
// such record in Prometheus, whether it was written or suppressed. The
// line that passes after a suppressed run carries the number suppressed.
// Records below WARN that are not refusals pass untouched and uncounted.
package logcap
