package client

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/bucket"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// maxKeyBytes and maxItems are the server's bounds (limiter.MaxKeyBytes,
// limiter.MaxItems).
const (
	maxKeyBytes = 1024
	maxItems    = 1000
)

// validateItems checks what the client can check of a routed call before
// anything is sent, so that a call whose items go to several nodes fails
// as a whole on bad input, as a unary Check does. What only a node knows
// (a policy's existence and capacity) is checked there: an item failing it
// fails the call, but the call's items sent to other nodes were decided.
func validateItems(items []*sluicev1.CheckItem) error {
	if len(items) == 0 || len(items) > maxItems {
		return invalid("items", fmt.Sprintf("%d items, 1 to %d per call", len(items), maxItems))
	}
	for i, it := range items {
		if field, reason := validateItem(it); field != "" {
			return invalid(fmt.Sprintf("items[%d].%s", i, field), reason)
		}
	}
	return nil
}

func validateItem(it *sluicev1.CheckItem) (field, reason string) {
	switch {
	case it.GetKey() == "":
		return "key", "must not be empty"
	case len(it.GetKey()) > maxKeyBytes:
		return "key", fmt.Sprintf("%d bytes, at most %d", len(it.GetKey()), maxKeyBytes)
	case it.GetCost() < 0:
		return "cost", "must be >= 0"
	}
	if it.GetPolicy() != "" {
		return "", ""
	}
	pl := it.GetLimit()
	if pl == nil {
		return "limit", "one of limit or policy is required"
	}
	alg := pl.GetAlgorithm()
	if alg == sluicev1.Algorithm_ALGORITHM_UNSPECIFIED {
		alg = sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET
	}
	if _, ok := sluicev1.Algorithm_name[int32(alg)]; !ok {
		return "limit.algorithm", fmt.Sprintf("unknown algorithm %d", alg)
	}
	if _, ok := sluicev1.FailureMode_name[int32(pl.GetFailureMode())]; !ok {
		return "limit.failure_mode", fmt.Sprintf("unknown failure mode %d", pl.GetFailureMode())
	}
	if p := pl.GetPeriod(); p != nil {
		if err := p.CheckValid(); err != nil {
			return "limit.period", err.Error()
		}
	}
	if _, ok := sluicev1.Calendar_name[int32(pl.GetCalendar())]; !ok {
		return "limit.calendar", fmt.Sprintf("unknown calendar %d", pl.GetCalendar())
	}
	if pl.GetTimezone() != "" && pl.GetCalendar() == sluicev1.Calendar_CALENDAR_UNSPECIFIED {
		return "limit.timezone", "needs a calendar"
	}
	// The zone itself is the node's to load; an unknown one comes back
	// as InvalidArgument naming limit.timezone.
	l := bucket.Limit{Algorithm: bucket.Algorithm(alg), Limit: pl.GetLimit(), Period: pl.GetPeriod().AsDuration(), Burst: pl.GetBurst(),
		Calendar: bucket.Calendar(pl.GetCalendar())}
	if l.Burst != 0 && l.Algorithm != bucket.TokenBucket {
		return "limit.burst", fmt.Sprintf("only token_bucket has a burst, not %s", l.Algorithm)
	}
	if err := l.Validate(); err != nil {
		var fe *bucket.FieldError
		if errors.As(err, &fe) {
			if fe.Field == "limit" {
				return "limit.limit", fe.Reason
			}
			return "limit." + fe.Field, fe.Reason
		}
		return "limit", err.Error()
	}
	switch {
	case l.Algorithm == bucket.Concurrency && it.GetCost() > 0:
		return "limit.algorithm", "concurrency limits are taken with Acquire and Release; Check may only read them (cost 0)"
	case it.GetCost() > l.Capacity() && l.Algorithm != bucket.FixedWindowHits:
		return "cost", fmt.Sprintf("%d exceeds the limit's capacity %d", it.GetCost(), l.Capacity())
	}
	return "", ""
}

func invalid(field, reason string) error {
	return fmt.Errorf("client: check: %w", status.Error(codes.InvalidArgument, field+": "+reason))
}
