package transport

import (
	"context"

	"google.golang.org/grpc"

	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// MemberInfo describes one cluster member for the Membership API.
type MemberInfo struct {
	Name, GossipAddr, GRPCAddr, State, Version string
	RingShare                                  float64
}

// MembersFunc lists the members as this node sees them. It must be safe
// for concurrent use.
type MembersFunc func() []MemberInfo

// RegisterMembership registers sluice.v1.Membership on s.
func RegisterMembership(s *grpc.Server, self string, members MembersFunc) {
	sluicev1.RegisterMembershipServer(s, &membershipServer{self: self, members: members})
}

type membershipServer struct {
	sluicev1.UnimplementedMembershipServer
	self    string
	members MembersFunc
}

func (m *membershipServer) Members(context.Context, *sluicev1.MembersRequest) (*sluicev1.MembersResponse, error) {
	ms := m.members()
	resp := &sluicev1.MembersResponse{Node: m.self, Members: make([]*sluicev1.Member, len(ms))}
	for i, mi := range ms {
		resp.Members[i] = &sluicev1.Member{Name: mi.Name, GossipAddr: mi.GossipAddr, GrpcAddr: mi.GRPCAddr,
			State: mi.State, RingShare: mi.RingShare, Version: mi.Version}
	}
	return resp, nil
}
