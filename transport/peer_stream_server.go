package transport

import (
	"context"
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// CheckStream serves the peers' Check calls on one stream: each message is
// decided in a goroutine of its own, as Check would decide it, and answered
// under its id. On DrainStreams it asks the peer to stop sending, and it
// returns once the peer has closed its side and every call is answered.
func (s *peerServer) CheckStream(stream sluicev1.Peer_CheckStreamServer) error {
	ctx := stream.Context()
	var (
		wg      sync.WaitGroup
		sendMu  sync.Mutex
		sendErr error
	)
	send := func(m *sluicev1.PeerCheckStreamResponse) {
		sendMu.Lock()
		if sendErr == nil {
			sendErr = stream.Send(m)
		}
		sendMu.Unlock()
	}
	defer wg.Wait()
	if s.drain != nil {
		stop := context.AfterFunc(s.drain, func() { send(&sluicev1.PeerCheckStreamResponse{Drain: true}) })
		defer stop()
	}
	for {
		req, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := &sluicev1.PeerCheckStreamResponse{Id: req.GetId()}
			resp, err := s.Check(ctx, req.GetRequest())
			if err != nil {
				st := status.Convert(err)
				out.Code, out.Message = int32(st.Code()), st.Message()
			} else {
				out.Response = resp
			}
			send(out)
		}()
	}
}
