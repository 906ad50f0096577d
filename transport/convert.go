package transport

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/internal/wire"
	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/store"
)

// Conversions between the limiter's peer types and the sluice.v1 peer
// messages. The to* functions fill preallocated messages so that a batch
// costs one allocation per slice, not one per item.

// toPeerItem fills item and lim (preallocated) from f and returns item.
func toPeerItem(item *sluicev1.PeerItem, lim *sluicev1.PeerLimit, f *limiter.Forwarded) *sluicev1.PeerItem {
	lim.Algorithm = wire.ToProtoAlgorithm(f.Limit.Algorithm)
	lim.Limit = f.Limit.Limit
	lim.PeriodNs = int64(f.Limit.Period)
	lim.Burst = f.Limit.Burst
	lim.Calendar, lim.Timezone = wire.ToProtoCalendar(f.Limit.Calendar), ""
	if f.Limit.Calendar != bucket.NoCalendar {
		lim.Timezone = f.Limit.Zone.String()
	}
	item.Hash = f.Hash
	item.Limit = lim
	item.Cost = f.Cost
	item.UpTo = f.UpTo
	item.ReturnGrant = f.Return
	item.Credit = f.Credit
	item.Report = f.Report
	item.Acting = f.Acting
	item.Inline = f.Inline
	item.Client = f.Client
	return item
}

// peerLimitFields maps bucket.FieldError fields to PeerItem field paths.
var peerLimitFields = map[string]string{
	"algorithm": "limit.algorithm",
	"limit":     "limit.limit",
	"period":    "limit.period_ns",
	"burst":     "limit.burst",
	"calendar":  "limit.calendar",
	"timezone":  "limit.timezone",
}

// fromPeerItem converts and validates a forwarded item. Peers are trusted
// but may run another version, so nothing reaches the limiter that the
// bucket algorithms would not accept: the limit passes Validate and the
// cost is within [0, limiter.MaxCost] (any cost >= 0 for fixed_window_hits). The error names the field relative
// to the item. zones caches the calendar limits' zones (nil: no cache).
func fromPeerItem(dst *limiter.Forwarded, it *sluicev1.PeerItem, zones *bucket.Zones) *wire.FieldError {
	if it == nil {
		return &wire.FieldError{Field: "", Reason: "must not be null"}
	}
	l := it.GetLimit()
	if l == nil {
		return &wire.FieldError{Field: "limit", Reason: "is required"}
	}
	alg, ok := wire.FromProtoAlgorithm(l.GetAlgorithm())
	if !ok {
		return &wire.FieldError{Field: "limit.algorithm", Reason: fmt.Sprintf("unknown algorithm %d", l.GetAlgorithm())}
	}
	*dst = limiter.Forwarded{
		Hash:   it.GetHash(),
		Limit:  bucket.Limit{Algorithm: alg, Limit: l.GetLimit(), Period: time.Duration(l.GetPeriodNs()), Burst: l.GetBurst()},
		Cost:   it.GetCost(),
		UpTo:   it.GetUpTo(),
		Return: it.GetReturnGrant(),
		Credit: it.GetCredit(),
		Report: it.GetReport(),
		Acting: it.GetActing(),
		Inline: it.GetInline(),
		Client: it.GetClient(),
	}
	if l.GetCalendar() != sluicev1.Calendar_CALENDAR_UNSPECIFIED || l.GetTimezone() != "" {
		cal, ok := wire.FromProtoCalendar(l.GetCalendar())
		if !ok {
			return &wire.FieldError{Field: "limit.calendar", Reason: fmt.Sprintf("unknown calendar %d", l.GetCalendar())}
		}
		loc, err := zones.Load(l.GetTimezone())
		if err != nil {
			return &wire.FieldError{Field: "limit.timezone", Reason: err.Error()}
		}
		dst.Limit.Calendar, dst.Limit.Zone = cal, loc
	}
	if err := dst.Limit.Validate(); err != nil {
		var fe *bucket.FieldError
		if errors.As(err, &fe) {
			field := peerLimitFields[fe.Field]
			if field == "" {
				field = "limit"
			}
			return &wire.FieldError{Field: field, Reason: fe.Reason}
		}
		return &wire.FieldError{Field: "limit", Reason: err.Error()}
	}
	switch {
	case dst.Cost < 0:
		return &wire.FieldError{Field: "cost", Reason: "must be >= 0"}
	case dst.Cost > limiter.MaxCost && dst.Limit.Algorithm != bucket.FixedWindowHits:
		return &wire.FieldError{Field: "cost", Reason: fmt.Sprintf("must be <= %d", limiter.MaxCost)}
	}
	if dst.Acting && (dst.UpTo || dst.Credit || dst.Report || dst.Return != 0 || dst.Limit.Algorithm == bucket.Concurrency) {
		return &wire.FieldError{Field: "acting", Reason: "only a plain check: not with up_to, return_grant, credit or report, nor of a concurrency limit"}
	}
	if dst.Report && (dst.UpTo || dst.Credit || dst.Return != 0 || dst.Limit.Algorithm == bucket.Concurrency) {
		return &wire.FieldError{Field: "report", Reason: "a report is a plain count: not with up_to, return_grant or credit, nor of a concurrency limit"}
	}
	if dst.Return != 0 || dst.Credit {
		field := "credit"
		if dst.Return != 0 {
			field = "return_grant"
		}
		switch {
		case dst.UpTo || (dst.Return != 0 && dst.Credit):
			return &wire.FieldError{Field: field, Reason: "only one of up_to, return_grant and credit may be set"}
		case dst.Limit.Algorithm != bucket.TokenBucket:
			return &wire.FieldError{Field: field, Reason: "applies to token buckets only"}
		case dst.Cost > dst.Limit.Capacity():
			return &wire.FieldError{Field: "cost", Reason: fmt.Sprintf("a return or credit must be <= the capacity %d", dst.Limit.Capacity())}
		}
	}
	return nil
}

// toPeerResult fills dst from a and returns it.
func toPeerResult(dst *sluicev1.PeerResult, a *limiter.Answer) *sluicev1.PeerResult {
	dst.Allowed = a.Allowed
	dst.Limit = a.Limit
	dst.Remaining = a.Remaining
	dst.ResetAfterNs = int64(a.ResetAfter)
	dst.RetryAfterNs = int64(a.RetryAfter)
	dst.Granted = a.Granted
	dst.Count = a.Count
	dst.GrantId = a.GrantID
	dst.Issuer = a.Issuer
	if a.Err != nil {
		code := answerCode(a.Err)
		dst.ErrorCode = int32(code)
		dst.ErrorMessage = a.Err.Error()
		// A plain status error (say from a second hop) travels as its
		// code and message, not as "rpc error: code = ... desc = ...".
		if st, ok := a.Err.(interface{ GRPCStatus() *status.Status }); ok && st.GRPCStatus().Code() == code {
			dst.ErrorMessage = st.GRPCStatus().Message()
		}
	}
	return dst
}

// fromPeerResult fills dst from r. A nil r (a malformed response) is an
// Internal error for that item.
func fromPeerResult(dst *limiter.Answer, r *sluicev1.PeerResult) {
	if r == nil {
		*dst = limiter.Answer{Err: status.Error(codes.Internal, "peer sent a null result")}
		return
	}
	*dst = limiter.Answer{Result: bucket.Result{
		Allowed:    r.GetAllowed(),
		Limit:      r.GetLimit(),
		Remaining:  r.GetRemaining(),
		ResetAfter: time.Duration(r.GetResetAfterNs()),
		RetryAfter: time.Duration(r.GetRetryAfterNs()),
		Count:      r.GetCount(),
	}, Granted: r.GetGranted(), GrantID: r.GetGrantId(), Issuer: r.GetIssuer()}
	if c := r.GetErrorCode(); c != 0 {
		dst.Err = answerError(codes.Code(c), r.GetErrorMessage())
		dst.Allowed = false
	}
}

// answerCode maps an owner's per-item error to the code sent to the peer.
// A peer that could not be reached by this node (a second hop) is
// Unavailable, an item the owner rejects is InvalidArgument, errors that
// already carry a status keep its code, and the rest map as in the public
// API. Never OK.
func answerCode(err error) codes.Code {
	switch {
	case errors.Is(err, store.ErrFull):
		return codes.ResourceExhausted
	case errors.Is(err, limiter.ErrStateElsewhere):
		return codes.FailedPrecondition
	case errors.Is(err, limiter.ErrPeerUnavailable):
		return codes.Unavailable
	case errors.Is(err, limiter.ErrInvalid), errors.Is(err, store.ErrWrongAlgorithm),
		errors.Is(err, bucket.ErrInvalidLimit), errors.Is(err, bucket.ErrUnknownAlgorithm):
		return codes.InvalidArgument
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.OK && st.Code() != codes.Unknown {
		return st.Code()
	}
	return wire.ItemCode(err)
}

// answerError rebuilds a per-item error sent by a peer: a gRPC status
// error, which for ResourceExhausted also wraps store.ErrFull so that the
// limiter and the public API treat a full owner like a full local store,
// and for DeadlineExceeded and Canceled the context error (the item came
// too late to the owner, which decided nothing).
func answerError(code codes.Code, msg string) error {
	switch code {
	case codes.ResourceExhausted:
		return &fullError{msg: msg}
	case codes.FailedPrecondition:
		return &elsewhereError{msg: msg}
	case codes.DeadlineExceeded, codes.Canceled:
		return &endedError{code: code, msg: msg}
	}
	return status.Error(code, msg)
}

// endedError is a peer's answer that an item's context ended there before
// it was decided (the call reached it late): errors.Is(err,
// context.DeadlineExceeded) (or context.Canceled) holds, so that the
// limiter answers the item by its failure mode, and status.Code(err) is
// the peer's code.
type endedError struct {
	code codes.Code
	msg  string
}

func (e *endedError) Error() string { return e.GRPCStatus().Err().Error() }

func (e *endedError) Unwrap() error {
	if e.code == codes.Canceled {
		return context.Canceled
	}
	return context.DeadlineExceeded
}

// GRPCStatus makes status.Code and status.FromError see the peer's code.
func (e *endedError) GRPCStatus() *status.Status { return status.New(e.code, e.msg) }

// elsewhereError is a peer's limiter.ErrStateElsewhere: nothing applied,
// the sender asks the key's heir.
type elsewhereError struct{ msg string }

func (e *elsewhereError) Error() string { return e.GRPCStatus().Err().Error() }

func (e *elsewhereError) Unwrap() error { return limiter.ErrStateElsewhere }

// GRPCStatus makes status.Code and status.FromError see FailedPrecondition.
func (e *elsewhereError) GRPCStatus() *status.Status {
	return status.New(codes.FailedPrecondition, e.msg)
}

// fullError is a peer's store.ErrFull: errors.Is(err, store.ErrFull) holds
// and status.Code(err) is ResourceExhausted.
type fullError struct{ msg string }

func (e *fullError) Error() string {
	if strings.HasPrefix(e.msg, store.ErrFull.Error()) {
		return e.msg
	}
	return fmt.Sprintf("%v: %s", store.ErrFull, e.msg)
}

func (e *fullError) Unwrap() error { return store.ErrFull }

// GRPCStatus makes status.Code and status.FromError see ResourceExhausted.
func (e *fullError) GRPCStatus() *status.Status {
	return status.New(codes.ResourceExhausted, e.Error())
}

// toKeyState fills dst from e and returns it. Only the state of e's
// algorithm is sent.
func toKeyState(dst *sluicev1.KeyState, e *store.Entry) *sluicev1.KeyState {
	dst.Hash = e.Key
	dst.Algorithm = wire.ToProtoAlgorithm(e.Algorithm)
	dst.PeriodNs = e.Period
	switch e.Algorithm {
	case bucket.TokenBucket:
		dst.Tat = e.Token.TAT
	case bucket.FixedWindow, bucket.SlidingWindow, bucket.FixedWindowHits:
		dst.WindowStart = e.Window.Start
		dst.WindowExpires = e.Window.Expires
		dst.WindowPrev = e.Window.Prev
		dst.WindowCur = e.Window.Cur
	case bucket.SlidingLog:
		n := len(e.Log.Entries)
		vals := make([]int64, 2*n) // one allocation for both columns
		dst.LogAt, dst.LogCost = vals[:n:n], vals[n:]
		for i, le := range e.Log.Entries {
			dst.LogAt[i] = le.At
			dst.LogCost[i] = le.Cost
		}
	case bucket.Concurrency:
		n := len(e.Leases.Leases)
		ids := make([]uint64, 3*n)
		dst.LeaseId, dst.LeaseTag = ids[:n:n], ids[n:2*n:2*n]
		vals := make([]int64, 2*n)
		dst.LeaseCost, dst.LeaseExpires = vals[:n:n], vals[n:]
		bound := false
		for i, l := range e.Leases.Leases {
			dst.LeaseId[i] = l.ID
			dst.LeaseTag[i] = l.Tag
			ids[2*n+i] = l.Holder
			bound = bound || l.Holder != 0
			dst.LeaseCost[i] = l.Cost
			dst.LeaseExpires[i] = l.Expires
		}
		if bound { // no column when no lease has a holder
			dst.LeaseHolder = ids[2*n:]
		}
	}
	dst.Reservations = toPeerReservations(e.Reservations)
	return dst
}

// fromKeyState converts and checks a state sent by a peer: a known
// algorithm, columns of equal length, a period for a sliding log. The
// error names the field relative to the state. The result shares nothing
// with ks.
func fromKeyState(dst *store.Entry, ks *sluicev1.KeyState) *wire.FieldError {
	if ks == nil {
		return &wire.FieldError{Field: "", Reason: "must not be null"}
	}
	alg, ok := wire.FromProtoAlgorithm(ks.GetAlgorithm())
	if !ok {
		return &wire.FieldError{Field: "algorithm", Reason: fmt.Sprintf("unknown algorithm %d", ks.GetAlgorithm())}
	}
	*dst = store.Entry{Key: ks.GetHash(), Algorithm: alg, Period: ks.GetPeriodNs()}
	switch alg {
	case bucket.TokenBucket:
		dst.Token.TAT = ks.GetTat()
	case bucket.FixedWindow, bucket.SlidingWindow, bucket.FixedWindowHits:
		dst.Window = bucket.WindowState{
			Start:   ks.GetWindowStart(),
			Expires: ks.GetWindowExpires(),
			Prev:    ks.GetWindowPrev(),
			Cur:     ks.GetWindowCur(),
		}
	case bucket.SlidingLog:
		at, cost := ks.GetLogAt(), ks.GetLogCost()
		if len(at) != len(cost) {
			return &wire.FieldError{Field: "log_cost", Reason: fmt.Sprintf("has %d values for %d log_at", len(cost), len(at))}
		}
		if dst.Period <= 0 {
			return &wire.FieldError{Field: "period_ns", Reason: "must be > 0 for sliding_log"}
		}
		if len(at) > 0 {
			dst.Log.Entries = make([]bucket.LogEntry, len(at))
			for i := range at {
				dst.Log.Entries[i] = bucket.LogEntry{At: at[i], Cost: cost[i]}
			}
		}
	case bucket.Concurrency:
		id, cost, exp := ks.GetLeaseId(), ks.GetLeaseCost(), ks.GetLeaseExpires()
		if len(cost) != len(id) {
			return &wire.FieldError{Field: "lease_cost", Reason: fmt.Sprintf("has %d values for %d lease_id", len(cost), len(id))}
		}
		if len(exp) != len(id) {
			return &wire.FieldError{Field: "lease_expires", Reason: fmt.Sprintf("has %d values for %d lease_id", len(exp), len(id))}
		}
		tag := ks.GetLeaseTag()
		if len(tag) != len(id) && len(tag) != 0 { // none from a node that predates tags
			return &wire.FieldError{Field: "lease_tag", Reason: fmt.Sprintf("has %d values for %d lease_id", len(tag), len(id))}
		}
		holder := ks.GetLeaseHolder()
		if len(holder) != len(id) && len(holder) != 0 { // none when no lease has a holder
			return &wire.FieldError{Field: "lease_holder", Reason: fmt.Sprintf("has %d values for %d lease_id", len(holder), len(id))}
		}
		if len(id) > 0 {
			dst.Leases.Leases = make([]bucket.Lease, len(id))
			for i := range id {
				dst.Leases.Leases[i] = bucket.Lease{ID: id[i], Cost: cost[i], Expires: exp[i]}
				if len(tag) > 0 {
					dst.Leases.Leases[i].Tag = tag[i]
				}
				if len(holder) > 0 {
					dst.Leases.Leases[i].Holder = holder[i]
				}
			}
		}
	}
	return fromPeerReservations(dst, ks.GetReservations())
}

// keyStateSize estimates the encoded size of e's KeyState, to split a
// handoff into messages well below gRPC's default 4 MiB limit.
func keyStateSize(e *store.Entry) int {
	return 64 + 20*len(e.Log.Entries) + 48*len(e.Leases.Leases) + 96*len(e.Reservations)
}
