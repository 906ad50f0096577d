package cluster

import (
	"encoding/json"
	"fmt"
	"net"

	"github.com/hashicorp/memberlist"
)

// NodeMeta is what a node advertises about itself to the other members,
// carried in memberlist's node metadata (at most memberlist.MetaMaxSize, 512
// bytes, encoded). Config.Meta sets it and Cluster.UpdateMeta changes it.
type NodeMeta struct {
	// GRPCAddr is the "host:port" other nodes forward checks to. Empty if
	// the node serves no gRPC (yet).
	GRPCAddr string
	// PeerAddr is the "host:port" of the node's peer service (sluice.v1.Peer:
	// forwarded checks, handoff, fetch), on a listener of its own. Empty
	// for a node of a version that served the peer service on GRPCAddr;
	// other nodes then dial GRPCAddr.
	PeerAddr string
	// Version is the node's build version, for mixed-version rollouts.
	Version string
	// PolicyHash is the node's policy.Set.Hash, so that members can tell
	// they run the same policies. Empty for a node of a version that
	// advertised none.
	PolicyHash string
	// Protocol is the node's peer protocol version (transport.PeerProtocol);
	// 0 for a node of a version that advertised none. The local node's, as
	// given in Config.Meta, decides which members it admits (protocol.go).
	Protocol int
	// RLSHash is the short hash of the node's Envoy RLS configuration (the
	// envoyproxy/ratelimit files or xDS resources in force), so that
	// members can tell they run the same one. Empty for a node of a
	// version that advertised none.
	RLSHash string
	// Raft is what the node advertises of its part in the Raft group that
	// orders the ring's epochs (package epoch's Advert). Zero for a node
	// of a version that runs no such group.
	Raft RaftMeta
}

// RaftMeta is a node's Raft advert: its Raft ID for this process start,
// the group it belongs to (0: none yet) and the number of the last epoch
// it applied. A node that advertises a Group or an Epoch has an ID.
type RaftMeta struct {
	ID, Group, Epoch uint64
}

// wireMeta is NodeMeta as encoded on the wire: JSON with one-letter keys,
// so that unknown keys from newer versions are ignored and old ones
// missing. Leaving is set by Cluster.Leave just before memberlist's leave
// message, so that the others can tell a graceful leave from a failure.
type wireMeta struct {
	GRPCAddr string `json:"g,omitempty"`
	PeerAddr string `json:"p,omitempty"`
	Version  string `json:"v,omitempty"`
	Policy   string `json:"h,omitempty"`
	Protocol int    `json:"w,omitempty"`
	RLS      string `json:"r,omitempty"`
	Leaving  bool   `json:"l,omitempty"`
	// Raft is absent for a node that advertises no Raft ID (an older
	// version); older versions ignore it.
	Raft *wireRaft `json:"e,omitempty"`
}

type wireRaft struct {
	ID    uint64 `json:"i,omitempty"`
	Group uint64 `json:"g,omitempty"`
	Epoch uint64 `json:"n,omitempty"`
}

// encode returns the wire form of m, with the leaving flag as given.
func (m NodeMeta) encode(leaving bool) ([]byte, error) {
	w := wireMeta{GRPCAddr: m.GRPCAddr, PeerAddr: m.PeerAddr, Version: m.Version, Policy: m.PolicyHash, RLS: m.RLSHash, Protocol: m.Protocol, Leaving: leaving}
	if m.Raft != (RaftMeta{}) {
		w.Raft = &wireRaft{ID: m.Raft.ID, Group: m.Raft.Group, Epoch: m.Raft.Epoch}
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, err
	}
	if len(b) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("encodes to %d bytes, more than memberlist's limit of %d", len(b), memberlist.MetaMaxSize)
	}
	return b, nil
}

// validate returns a *ConfigError for each problem of m: a GRPCAddr or
// PeerAddr that is not host:port, a negative Protocol, a Raft advert with
// a group or an epoch but no ID, or an encoding too long for memberlist in
// any form it is sent in (the leaving form is the longest).
func (m NodeMeta) validate() []error {
	var errs []error
	if m.GRPCAddr != "" {
		if _, _, err := net.SplitHostPort(m.GRPCAddr); err != nil {
			errs = append(errs, &ConfigError{Field: "Meta.GRPCAddr", Reason: fmt.Sprintf("must be host:port, got %q", m.GRPCAddr)})
		}
	}
	if m.PeerAddr != "" {
		if _, _, err := net.SplitHostPort(m.PeerAddr); err != nil {
			errs = append(errs, &ConfigError{Field: "Meta.PeerAddr", Reason: fmt.Sprintf("must be host:port, got %q", m.PeerAddr)})
		}
	}
	if m.Protocol < 0 {
		errs = append(errs, &ConfigError{Field: "Meta.Protocol", Reason: fmt.Sprintf("must not be negative, got %d", m.Protocol)})
	}
	if m.Raft.ID == 0 && m.Raft != (RaftMeta{}) {
		errs = append(errs, &ConfigError{Field: "Meta.Raft.ID", Reason: fmt.Sprintf("is 0 with group %x, epoch %d", m.Raft.Group, m.Raft.Epoch)})
	}
	if _, err := m.encode(true); err != nil {
		errs = append(errs, &ConfigError{Field: "Meta", Reason: err.Error()})
	}
	return errs
}

// decodeMeta parses the metadata of a member. Empty metadata (a node that
// advertises none) decodes to the zero NodeMeta.
func decodeMeta(b []byte) (meta NodeMeta, leaving bool, err error) {
	if len(b) == 0 {
		return NodeMeta{}, false, nil
	}
	var w wireMeta
	if err := json.Unmarshal(b, &w); err != nil {
		return NodeMeta{}, false, fmt.Errorf("cluster: undecodable node metadata %q: %w", b, err)
	}
	if w.Protocol < 0 {
		return NodeMeta{}, false, fmt.Errorf("cluster: node metadata %q: negative protocol %d", b, w.Protocol)
	}
	meta = NodeMeta{GRPCAddr: w.GRPCAddr, PeerAddr: w.PeerAddr, Version: w.Version, PolicyHash: w.Policy, RLSHash: w.RLS, Protocol: w.Protocol}
	if w.Raft != nil {
		meta.Raft = RaftMeta{ID: w.Raft.ID, Group: w.Raft.Group, Epoch: w.Raft.Epoch}
		if meta.Raft.ID == 0 && meta.Raft != (RaftMeta{}) {
			return NodeMeta{}, false, fmt.Errorf("cluster: node metadata %q: raft advert without an ID", b)
		}
	}
	return meta, w.Leaving, nil
}
