package client

import (
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// toProtoLimit is l on the wire.
func toProtoLimit(l *Limit) *sluicev1.Limit {
	pl := &sluicev1.Limit{Algorithm: l.Algorithm, Limit: l.Limit, Burst: l.Burst, FailureMode: l.FailureMode,
		Calendar: l.Calendar, Timezone: l.Timezone}
	if l.Period != 0 {
		pl.Period = durationpb.New(l.Period)
	}
	return pl
}

// protoItem holds a CheckItem and everything it points to, so that a
// call's items take one allocation rather than five each.
type protoItem struct {
	item  sluicev1.CheckItem
	cost  int64
	spec  sluicev1.CheckItem_Limit
	limit sluicev1.Limit
	dur   durationpb.Duration
}

// set fills p with a check of cost units of key under policy or l and
// returns its item.
func (p *protoItem) set(key, policy string, l *Limit, cost int64) *sluicev1.CheckItem {
	p.cost = cost
	p.item.Key, p.item.Cost = key, &p.cost
	if policy != "" {
		p.item.Spec = &sluicev1.CheckItem_Policy{Policy: policy}
		return &p.item
	}
	p.limit = sluicev1.Limit{Algorithm: l.Algorithm, Limit: l.Limit, Burst: l.Burst, FailureMode: l.FailureMode,
		Calendar: l.Calendar, Timezone: l.Timezone}
	if l.Period != 0 {
		p.dur.Seconds, p.dur.Nanos = int64(l.Period/time.Second), int32(l.Period%time.Second)
		p.limit.Period = &p.dur
	}
	p.spec.Limit = &p.limit
	p.item.Spec = &p.spec
	return &p.item
}

func toProtoItem(key, policy string, l *Limit, cost int64) *sluicev1.CheckItem {
	return new(protoItem).set(key, policy, l, cost)
}

func fromProtoResult(r *sluicev1.CheckResult) Result {
	out := Result{
		Allowed:    r.GetAllowed(),
		Limit:      r.GetLimit(),
		Remaining:  r.GetRemaining(),
		ResetAfter: r.GetResetAfter().AsDuration(),
		RetryAfter: r.GetRetryAfter().AsDuration(),
		Owner:      r.GetOwner(),
		granted:    r.GetGranted(),
		grantID:    r.GetGrantId(),
		issuer:     r.GetIssuer(),
	}
	switch r.GetSource() {
	case sluicev1.Source_SOURCE_OWNER:
		out.Source = "owner"
	case sluicev1.Source_SOURCE_GRANT:
		out.Source = "grant"
	case sluicev1.Source_SOURCE_FALLBACK:
		out.Source = "fallback"
	}
	if e := r.GetError(); e != nil {
		msg := e.GetMessage()
		if f := e.GetField(); f != "" {
			msg = f + ": " + msg
		}
		out.Err = status.Error(codes.Code(e.GetCode()), msg)
	}
	return out
}
