package api

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/ring"

	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// MemberInfo describes one cluster member for the Membership API.
// PolicyHash is the member's policy.Set.Hash and RLSHash that of its Envoy
// RLS configuration, each empty if it advertises none.
type MemberInfo struct {
	Name, GossipAddr, GRPCAddr, State, Version, PolicyHash, RLSHash string
	RingShare                                                       float64
	// RaftRole is the member's role in the Raft group of the ring's
	// epochs, as the answering node knows it: "leader", "voter",
	// "learner", or empty while it is in none.
	RaftRole string
	// RaftGroup and Epoch are what the member advertises: its group (0:
	// none yet) and the number of the last epoch it applied.
	RaftGroup, Epoch uint64
}

// MembersFunc lists the members as this node sees them. It must be safe
// for concurrent use.
type MembersFunc func() []MemberInfo

// Topology is what a client needs, besides the members, to compute each
// key's owner as the nodes do: the ring's configuration and the algorithm
// of each policy (a bucket's identity includes it).
type Topology struct {
	Ring     ring.Config
	Policies map[string]bucket.Algorithm
}

// TopologyFunc returns the current Topology. It must be safe for concurrent
// use.
type TopologyFunc func() Topology

// InsecureHeader is the response header (gRPC metadata) of a Members call
// answered by a node that runs its cluster without authentication
// (`sluice serve --insecure`); its value is "true".
const InsecureHeader = "sluice-insecure"

// MembershipOption changes what RegisterMembership registers.
type MembershipOption func(*membershipServer)

// MembershipInsecure makes every Members answer carry InsecureHeader.
func MembershipInsecure() MembershipOption {
	return func(m *membershipServer) { m.insecure = true }
}

// RegisterMembership registers sluice.v1.Membership on s.
func RegisterMembership(s *grpc.Server, self string, members MembersFunc, topology TopologyFunc, opts ...MembershipOption) {
	m := &membershipServer{self: self, members: members, topology: topology}
	for _, o := range opts {
		o(m)
	}
	sluicev1.RegisterMembershipServer(s, m)
}

type membershipServer struct {
	sluicev1.UnimplementedMembershipServer
	self     string
	members  MembersFunc
	topology TopologyFunc
	insecure bool
}

func (m *membershipServer) Members(ctx context.Context, _ *sluicev1.MembersRequest) (*sluicev1.MembersResponse, error) {
	if m.insecure {
		_ = grpc.SetHeader(ctx, metadata.Pairs(InsecureHeader, "true")) // only fails on a closed stream
	}
	ms := m.members()
	resp := &sluicev1.MembersResponse{Node: m.self, Members: make([]*sluicev1.Member, len(ms))}
	for i, mi := range ms {
		resp.Members[i] = &sluicev1.Member{Name: mi.Name, GossipAddr: mi.GossipAddr, GrpcAddr: mi.GRPCAddr,
			State: mi.State, RingShare: mi.RingShare, Version: mi.Version, PolicyHash: mi.PolicyHash, RlsHash: mi.RLSHash,
			RaftRole: mi.RaftRole, RaftGroup: mi.RaftGroup, Epoch: mi.Epoch}
	}
	if m.topology != nil {
		t := m.topology()
		resp.Ring = &sluicev1.RingConfig{PartitionCount: int32(t.Ring.PartitionCount),
			ReplicationFactor: int32(t.Ring.ReplicationFactor), Load: t.Ring.Load}
		resp.Policies = make(map[string]sluicev1.Algorithm, len(t.Policies))
		for name, alg := range t.Policies {
			resp.Policies[name] = sluicev1.Algorithm(alg)
		}
	}
	return resp, nil
}
