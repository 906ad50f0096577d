package client

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// Member is a cluster member as one node sees it.
type Member struct {
	Name       string  `json:"name"`
	GRPCAddr   string  `json:"grpc_addr"`
	GossipAddr string  `json:"gossip_addr"`
	State      string  `json:"state"`
	RingShare  float64 `json:"ring_share"`
	Version    string  `json:"version"`
	// PolicyHash is a short hash of the member's policies: members that
	// run the same policies have the same one. Empty for a member that
	// advertises none (an older version).
	PolicyHash string `json:"policy_hash,omitempty"`
	// RLSHash is a short hash of the member's Envoy RLS configuration:
	// members that load the same one have the same. Empty for a member
	// that advertises none (an older version).
	RLSHash string `json:"rls_hash,omitempty"`
	// RaftRole is the member's role in the Raft group that orders the
	// ring's epochs, as the answering node knows it: "leader", "voter",
	// "learner", or empty while it is in none (or runs none: an older
	// version).
	RaftRole string `json:"raft_role,omitempty"`
	// RaftGroup is the group the member advertises, as 16 hex digits;
	// empty while it is in none.
	RaftGroup string `json:"raft_group,omitempty"`
	// Epoch is the number of the last epoch the member applied, as it
	// advertises it; 0 while it is in no group.
	Epoch uint64 `json:"epoch,omitempty"`
}

// Members asks one node for the cluster's members. It returns the name of
// the node that answered.
func (c *Client) Members(ctx context.Context) (string, []Member, error) {
	node, ms, _, err := c.members(ctx)
	return node, ms, err
}

// Insecure asks one node whether it runs its cluster without
// authentication (`sluice serve --insecure`): its Members answer carries
// the header "sluice-insecure: true".
func (c *Client) Insecure(ctx context.Context) (bool, error) {
	_, _, insecure, err := c.members(ctx)
	return insecure, err
}

// members calls Membership.Members, reading the insecure header too.
func (c *Client) members(ctx context.Context) (string, []Member, bool, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	var md metadata.MD
	resp, err := sluicev1.NewMembershipClient(c.conn).Members(ctx, &sluicev1.MembersRequest{}, grpc.Header(&md))
	if err != nil {
		return "", nil, false, fmt.Errorf("client: members: %w", err)
	}
	insecure := slices.Contains(md.Get("sluice-insecure"), "true")
	out := make([]Member, len(resp.GetMembers()))
	for i, m := range resp.GetMembers() {
		out[i] = Member{Name: m.GetName(), GRPCAddr: m.GetGrpcAddr(), GossipAddr: m.GetGossipAddr(),
			State: m.GetState(), RingShare: m.GetRingShare(), Version: m.GetVersion(), PolicyHash: m.GetPolicyHash(), RLSHash: m.GetRlsHash(),
			RaftRole: m.GetRaftRole(), Epoch: m.GetEpoch()}
		if g := m.GetRaftGroup(); g != 0 {
			out[i].RaftGroup = fmt.Sprintf("%016x", g)
		}
	}
	return resp.GetNode(), out, insecure, nil
}
