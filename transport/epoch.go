package transport

import (
	"errors"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// Epochs on peer calls (peer protocol 2; limiter/epochs.go, docs/cluster.md
// "Epochs on peer calls"). Every request that carries keys carries the
// sender's epoch (PeerClientConfig.Epoch, read once per RPC), and the
// server hands it to the limiter on the call's context
// (limiter.WithSenderEpoch). A call the limiter refuses for its epoch
// (limiter.EpochError) is answered ABORTED with an ErrorInfo whose reason
// is EPOCH_AHEAD (a redirect) or EPOCH_BEHIND and whose metadata "epoch"
// is the receiver's epoch; on CheckStream, code ABORTED with the
// receiver's epoch in PeerCheckStreamResponse.epoch for a redirect (0 for
// EPOCH_BEHIND). The client turns either back into a limiter.EpochError.
const (
	epochDomain      = "sluice.v1.Peer"
	reasonEpochAhead = "EPOCH_AHEAD"
	reasonBehind     = "EPOCH_BEHIND"
	epochKey         = "epoch"
)

// epoch is this node's epoch for the requests it sends; 0 without
// PeerClientConfig.Epoch.
func (c *PeerClient) epoch() uint64 {
	if c.cfg.Epoch == nil {
		return 0
	}
	return c.cfg.Epoch()
}

// epochStatus is the ABORTED status of a limiter.EpochError, with its
// ErrorInfo; ok false if err is none.
func epochStatus(err error) (*status.Status, bool) {
	var ee *limiter.EpochError
	if !errors.As(err, &ee) {
		return nil, false
	}
	reason := reasonBehind
	if ee.Ahead {
		reason = reasonEpochAhead
	}
	st := status.New(codes.Aborted, err.Error())
	if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: epochDomain,
		Metadata: map[string]string{epochKey: strconv.FormatUint(ee.Epoch, 10)}}); derr == nil {
		st = d
	}
	return st, true
}

// epochOf is the limiter.EpochError an ABORTED status of a peer carries,
// or nil: an ErrorInfo of reason EPOCH_AHEAD or EPOCH_BEHIND whose epoch
// is a number (a redirect needs one above 0).
func epochOf(err error) *limiter.EpochError {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Aborted {
		return nil
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != epochDomain {
			continue
		}
		e, perr := strconv.ParseUint(info.GetMetadata()[epochKey], 10, 64)
		switch {
		case perr != nil:
			return nil
		case info.GetReason() == reasonEpochAhead && e > 0:
			return &limiter.EpochError{Epoch: e, Ahead: true}
		case info.GetReason() == reasonBehind:
			return &limiter.EpochError{Epoch: e}
		}
	}
	return nil
}

// streamStatus is the status of a CheckStream answer's error (code != OK):
// its code and message, and for ABORTED the epoch's ErrorInfo rebuilt from
// the answer's epoch (above 0: a redirect; 0: the receiver was behind).
func streamStatus(resp *sluicev1.PeerCheckStreamResponse) error {
	code := codes.Code(resp.GetCode())
	if code != codes.Aborted {
		return status.Error(code, resp.GetMessage())
	}
	st, _ := epochStatus(&limiter.EpochError{Epoch: resp.GetEpoch(), Ahead: resp.GetEpoch() > 0})
	p := st.Proto()
	p.Message = resp.GetMessage()
	return status.ErrorProto(p)
}

// streamEpoch is PeerCheckStreamResponse.epoch for a call's error: the
// receiver's epoch of a redirect, else 0.
func streamEpoch(err error) uint64 {
	if ee := epochOf(err); ee != nil && ee.Ahead {
		return ee.Epoch
	}
	return 0
}
