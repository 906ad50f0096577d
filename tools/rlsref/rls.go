package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// rlsClient is a connection to one RLS v3 server.
type rlsClient struct {
	conn *grpc.ClientConn
	api  pb.RateLimitServiceClient
}

func dialRLS(addr string) (*rlsClient, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &rlsClient{conn: conn, api: pb.NewRateLimitServiceClient(conn)}, nil
}

func (c *rlsClient) Close() error { return c.conn.Close() }

// answer is one call's outcome: a response or a gRPC error.
type answer struct {
	Response *pb.RateLimitResponse
	Error    *grpcError
	// Sent and Received bracket the call.
	Sent, Received time.Time
}

// call sends req and times it.
func (c *rlsClient) call(ctx context.Context, req *pb.RateLimitRequest) answer {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	a := answer{Sent: time.Now()}
	resp, err := c.api.ShouldRateLimit(ctx, req)
	a.Received = time.Now()
	if err != nil {
		st := status.Convert(err)
		a.Error = &grpcError{Code: st.Code().String(), Message: st.Message()}
		return a
	}
	a.Response = resp
	return a
}

// same reports whether two answers are the same (times aside).
func (a answer) same(b answer) bool {
	switch {
	case a.Error != nil || b.Error != nil:
		return a.Error != nil && b.Error != nil && *a.Error == *b.Error
	default:
		return proto.Equal(a.Response, b.Response)
	}
}

// sameButReset is same, but for the statuses' duration_until_reset (a
// pinned answer was recorded at another time than a live one).
func (a answer) sameButReset(b answer) bool {
	if a.Response == nil || b.Response == nil {
		return a.same(b)
	}
	x, y := proto.Clone(a.Response).(*pb.RateLimitResponse), proto.Clone(b.Response).(*pb.RateLimitResponse)
	for _, r := range []*pb.RateLimitResponse{x, y} {
		for _, st := range r.Statuses {
			st.DurationUntilReset = nil
		}
	}
	return proto.Equal(x, y)
}

// String is the answer as one line of JSON.
func (a answer) String() string {
	if a.Error != nil {
		b, _ := json.Marshal(a.Error)
		return "error " + string(b)
	}
	b, err := protojson.Marshal(a.Response)
	if err != nil {
		return fmt.Sprintf("unprintable response: %v", err)
	}
	var v any
	if json.Unmarshal(b, &v) == nil {
		b, _ = json.Marshal(v)
	}
	return string(b)
}

// waitRLS calls ShouldRateLimit on a domain no case uses until the server
// answers, or the deadline passes.
func waitRLS(ctx context.Context, c *rlsClient, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	req := &pb.RateLimitRequest{Domain: "rlsref-readiness-probe", Descriptors: readinessDescriptors()}
	for {
		a := c.call(ctx, req)
		if a.Error == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not answering: %s", a)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func readinessDescriptors() []*rlv3.RateLimitDescriptor {
	return []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "probe", Value: "1"}}}}
}
