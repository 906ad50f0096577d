package transport

import (
	"context"

	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/internal/wire"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// CheckStream serves the peers' Check calls on one stream (see
// wire.ServeBatches): each message is decided as Check would decide it and
// answered under its id, with Check's error, if any, in code and message.
func (s *peerServer) CheckStream(stream sluicev1.Peer_CheckStreamServer) error {
	ctx := stream.Context()
	handle := func(req *sluicev1.PeerCheckStreamRequest) *sluicev1.PeerCheckStreamResponse {
		out := &sluicev1.PeerCheckStreamResponse{Id: req.GetId()}
		resp, err := s.Check(ctx, req.GetRequest())
		if err != nil {
			st := status.Convert(err)
			out.Code, out.Message, out.Epoch = int32(st.Code()), st.Message(), streamEpoch(err)
		} else {
			out.Response = resp
		}
		return out
	}
	fail := func(req *sluicev1.PeerCheckStreamRequest, err error) *sluicev1.PeerCheckStreamResponse {
		st := status.Convert(err)
		return &sluicev1.PeerCheckStreamResponse{Id: req.GetId(), Code: int32(st.Code()), Message: st.Message()}
	}
	return wire.ServeBatches(stream.Recv, stream.Send, wire.Batches[*sluicev1.PeerCheckStreamRequest, *sluicev1.PeerCheckStreamResponse]{
		Drain: s.drain, DrainMsg: &sluicev1.PeerCheckStreamResponse{Drain: true},
		Handle: handle, Fail: fail, Method: sluicev1.Peer_CheckStream_FullMethodName, Recovery: s.recovery,
		Gate: s.gate(ctx),
	})
}

// gate is the admission of the messages of the stream of ctx; nil without
// limits.
func (s *peerServer) gate(ctx context.Context) *wire.Gate {
	if s.limits == nil {
		return nil
	}
	return s.limits.Gate(ctx)
}
