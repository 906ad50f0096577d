package transport

import (
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
			out.Code, out.Message = int32(st.Code()), st.Message()
		} else {
			out.Response = resp
		}
		return out
	}
	return wire.ServeBatches(stream.Recv, stream.Send, s.drain, &sluicev1.PeerCheckStreamResponse{Drain: true}, handle)
}
