package wire

import (
	"github.com/sluice-rl/sluice/bucket"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// ToProtoAlgorithm maps a bucket algorithm to the wire enum.
func ToProtoAlgorithm(a bucket.Algorithm) sluicev1.Algorithm {
	switch a {
	case bucket.TokenBucket:
		return sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET
	case bucket.SlidingWindow:
		return sluicev1.Algorithm_ALGORITHM_SLIDING_WINDOW
	case bucket.FixedWindow:
		return sluicev1.Algorithm_ALGORITHM_FIXED_WINDOW
	case bucket.SlidingLog:
		return sluicev1.Algorithm_ALGORITHM_SLIDING_LOG
	case bucket.Concurrency:
		return sluicev1.Algorithm_ALGORITHM_CONCURRENCY
	case bucket.FixedWindowHits:
		return sluicev1.Algorithm_ALGORITHM_FIXED_WINDOW_HITS
	}
	return sluicev1.Algorithm_ALGORITHM_UNSPECIFIED
}

// FromProtoAlgorithm maps the wire enum to a bucket algorithm. UNSPECIFIED
// and unknown values report false: the caller decides what UNSPECIFIED
// means (the public API's token bucket default; an error between peers,
// which always send a resolved algorithm).
func FromProtoAlgorithm(a sluicev1.Algorithm) (bucket.Algorithm, bool) {
	switch a {
	case sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET:
		return bucket.TokenBucket, true
	case sluicev1.Algorithm_ALGORITHM_SLIDING_WINDOW:
		return bucket.SlidingWindow, true
	case sluicev1.Algorithm_ALGORITHM_FIXED_WINDOW:
		return bucket.FixedWindow, true
	case sluicev1.Algorithm_ALGORITHM_SLIDING_LOG:
		return bucket.SlidingLog, true
	case sluicev1.Algorithm_ALGORITHM_CONCURRENCY:
		return bucket.Concurrency, true
	case sluicev1.Algorithm_ALGORITHM_FIXED_WINDOW_HITS:
		return bucket.FixedWindowHits, true
	}
	return 0, false
}

// ToProtoCalendar maps a bucket calendar to the wire enum (their numbers
// agree: NoCalendar is CALENDAR_UNSPECIFIED).
func ToProtoCalendar(c bucket.Calendar) sluicev1.Calendar { return sluicev1.Calendar(c) }

// FromProtoCalendar maps the wire enum to a bucket calendar, reporting
// false for values it does not know.
func FromProtoCalendar(c sluicev1.Calendar) (bucket.Calendar, bool) {
	if c < 0 || c > sluicev1.Calendar(bucket.LastCalendar) {
		return 0, false
	}
	return bucket.Calendar(c), true
}
