package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/internal/wire"
	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// Bounds of the Raft RPC. RaftSender never exceeds them; the server
// refuses a request beyond them with InvalidArgument naming the field.
const (
	// MaxRaftMessageBytes bounds one Raft message. The ring's log is small:
	// its snapshot holds a few KiB per member, so 1 MiB is a ring of
	// hundreds of members, and an append is bounded by the group's
	// raft.Config.MaxSizePerMsg, which must stay below this (1 MiB is also
	// etcd's usual MaxSizePerMsg). It leaves a batch (raftBatchBytes)
	// under the peer server's default gRPC receive bound of 4 MiB
	// (node.DefaultGRPCMaxRecvBytes), so that a batch is refused by this
	// validation, naming the field, rather than by gRPC.
	MaxRaftMessageBytes = 1 << 20
	// MaxRaftBatch is the most messages in one RaftRequest: more than a
	// Ready's messages to one peer (raft.Config.MaxInflightMsgs appends
	// and a heartbeat) usually hold.
	MaxRaftBatch = 512
	// maxRaftFrom bounds the sender's name (memberlist's names are far
	// shorter).
	maxRaftFrom = 256
)

// RaftReceiver takes the Raft messages this node receives (package epoch's
// Raft group satisfies it). from is the sending node's name as the request
// states it (the peer port's mTLS or cluster secret authenticated the
// caller as a peer; its name is its word); msg is one raftpb.Message in its
// protobuf encoding, at most MaxRaftMessageBytes, and the receiver's to
// keep (it is not reused).
//
// Concurrency: StepRaft is called from one goroutine per incoming stream,
// so calls for different senders run concurrently and the receiver must be
// safe for concurrent use; the messages of one sender's stream are given
// one at a time, in the order that sender sent them. A call should not
// block for long (hand the message to the Raft loop, or drop it: Raft
// retransmits): while it blocks, that sender's stream is not read, and its
// queue fills and drops. ctx ends when the sender goes away or this node
// stops serving.
//
// Errors end the sender's stream: one wrapping ErrRaftNotMember or
// limiter.ErrNotMember (the sender is not a node the group takes messages
// from) with PermissionDenied, as the other peer calls refuse a
// non-member; one wrapping ErrRaftMessage (msg is not a Raft message) with
// InvalidArgument naming messages[i]; any other with Unavailable. A
// message the receiver ignores (from a removed member, say) is not an
// error.
type RaftReceiver interface {
	StepRaft(ctx context.Context, from string, msg []byte) error
}

// Errors a RaftReceiver wraps to refuse a message (see RaftReceiver).
var (
	ErrRaftNotMember = errors.New("transport: raft sender is not a member of the group")
	ErrRaftMessage   = errors.New("transport: not a raft message")
)

// validRaftRequest checks a RaftRequest against the bounds: InvalidArgument
// with a BadRequest detail naming the field.
func validRaftRequest(req *sluicev1.RaftRequest) error {
	switch from := req.GetFrom(); {
	case from == "":
		return wire.InvalidArgument("from", "is required")
	case len(from) > maxRaftFrom:
		return wire.InvalidArgument("from", fmt.Sprintf("%d bytes, at most %d", len(from), maxRaftFrom))
	}
	msgs := req.GetMessages()
	switch {
	case len(msgs) == 0:
		return wire.InvalidArgument("messages", "must not be empty")
	case len(msgs) > MaxRaftBatch:
		return wire.InvalidArgument("messages", fmt.Sprintf("%d messages, at most %d per request", len(msgs), MaxRaftBatch))
	}
	for i, m := range msgs {
		switch {
		case len(m) == 0:
			return wire.InvalidArgument(fmt.Sprintf("messages[%d]", i), "must not be empty")
		case len(m) > MaxRaftMessageBytes:
			return wire.InvalidArgument(fmt.Sprintf("messages[%d]", i), fmt.Sprintf("%d bytes, at most %d", len(m), MaxRaftMessageBytes))
		}
	}
	return nil
}

// raftStatus is the status that ends a stream whose message i the
// receiver refused with err.
func raftStatus(i int, err error) error {
	switch {
	case errors.Is(err, ErrRaftNotMember), errors.Is(err, limiter.ErrNotMember):
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, ErrRaftMessage):
		return wire.InvalidArgument(fmt.Sprintf("messages[%d]", i), err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Unavailable, err.Error())
}

// Raft serves a peer's stream of Raft messages: each request is validated
// whole, then its messages are stepped in order. It is not admitted by
// ServerConfig.Limits: the ring's control traffic is small, and shedding it
// under check load would stall ring changes when they matter most.
func (s *peerServer) Raft(stream sluicev1.Peer_RaftServer) error {
	if s.raft == nil {
		return status.Error(codes.Unimplemented, "this node runs no Raft group")
	}
	ctx := stream.Context()
	if s.drain != nil {
		// On drain, ask the caller to close its side; the loop below ends
		// at its EOF. The send is done before this handler returns.
		var sent sync.WaitGroup
		sent.Add(1)
		stop := context.AfterFunc(s.drain, func() {
			defer sent.Done()
			_ = stream.Send(&sluicev1.RaftResponse{Drain: true})
		})
		defer func() {
			if stop() {
				sent.Done()
			}
			sent.Wait()
		}()
	}
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		start := time.Now()
		if err := validRaftRequest(req); err != nil {
			return err
		}
		from := req.GetFrom()
		if from == s.name {
			return status.Error(codes.PermissionDenied, fmt.Errorf("%w: %q is this node's name", ErrRaftNotMember, from).Error())
		}
		for i, m := range req.GetMessages() {
			if err := s.raft.StepRaft(ctx, from, m); err != nil {
				return raftStatus(i, err)
			}
		}
		s.observe(peerRaft, start)
	}
}
