package policy

import "strconv"

// MaxEcho is the most bytes of an input that an error message quotes: a
// value from a client or a file may be huge, and an error echoing all of
// it costs the same again in logs and answers.
const MaxEcho = 64

// Echo quotes s for an error message: all of it when it is at most
// MaxEcho bytes, otherwise its first MaxEcho bytes followed by its length,
// as in "aaaa…"…(3145728 bytes).
func Echo(s string) string {
	if len(s) <= MaxEcho {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:MaxEcho]) + "…(" + strconv.Itoa(len(s)) + " bytes)"
}
