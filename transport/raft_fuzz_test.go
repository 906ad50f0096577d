package transport

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// FuzzRaftRequest decodes a Peer.Raft request from arbitrary bytes and
// validates it: validation never panics, a request it accepts is within
// every bound, and a refusal is InvalidArgument naming a field of the
// request.
func FuzzRaftRequest(f *testing.F) {
	for _, r := range []*sluicev1.RaftRequest{
		raftReq("a", "m"),
		raftReq("a", "m", "", "m"),
		raftReq("", "m"),
		raftReq("a"),
		raftReq(strings.Repeat("n", maxRaftFrom+1), "m"),
	} {
		b, err := r.MarshalVT()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &sluicev1.RaftRequest{}
		if req.UnmarshalVT(data) != nil {
			return
		}
		err := validRaftRequest(req)
		msgs := req.GetMessages()
		if err == nil {
			if n := len(req.GetFrom()); n == 0 || n > maxRaftFrom {
				t.Fatalf("accepted from of %d bytes", n)
			}
			if len(msgs) == 0 || len(msgs) > MaxRaftBatch {
				t.Fatalf("accepted %d messages", len(msgs))
			}
			for i, m := range msgs {
				if len(m) == 0 || len(m) > MaxRaftMessageBytes {
					t.Fatalf("accepted messages[%d] of %d bytes", i, len(m))
				}
			}
			return
		}
		st := status.Convert(err)
		if st.Code() != codes.InvalidArgument {
			t.Fatalf("code %v, want InvalidArgument", st.Code())
		}
		var field string
		for _, d := range st.Details() {
			if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
				field = br.GetFieldViolations()[0].GetField()
			}
		}
		ok := field == "from" || field == "messages"
		for i := range msgs {
			ok = ok || field == fmt.Sprintf("messages[%d]", i)
		}
		if !ok {
			t.Fatalf("refused naming %q, not a field of the request (%v)", field, err)
		}
	})
}
