package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/hashicorp/memberlist"
)

// ErrIncompatibleProtocol is returned by Run when this node's join finds
// a member whose peer protocol version (NodeMeta.Protocol) is too far from
// this node's: the two could not work side by side, so this node must not
// join (docs/compatibility.md).
var ErrIncompatibleProtocol = errors.New("cluster: incompatible peer protocol")

// incompatibleMsg starts the error of NotifyMerge for a member of an
// incompatible protocol; memberlist's Join returns it as text only.
const incompatibleMsg = "incompatible peer protocol"

// maxWarned bounds the members whose refusal protocolGate remembers having
// logged.
const maxWarned = 1024

// protocolsCompatible reports whether nodes of peer protocol versions a
// and b may be members of one cluster: equal, or one apart (N and N-1
// during a rolling upgrade). The rule of transport.ProtocolCompatible,
// which refuses the peer calls; cluster imports nothing of the module.
func protocolsCompatible(a, b int) bool {
	return a >= 0 && b >= 0 && a-b <= 1 && b-a <= 1
}

// protocolGate admits members by their peer protocol version: memberlist
// ignores the alive messages of a node whose NodeMeta.Protocol is
// incompatible with this node's (so it never becomes a member here), and
// a join whose other side has such a member is refused.
type protocolGate struct {
	self  string
	local int
	log   *slog.Logger

	mu     sync.Mutex
	warned map[string]int // member name -> the protocol last logged as refused
}

func newProtocolGate(self string, local int, log *slog.Logger) *protocolGate {
	return &protocolGate{self: self, local: local, log: log, warned: make(map[string]int)}
}

// refusal is the error for a member of protocol remote, or nil.
func (g *protocolGate) refusal(name string, remote int) error {
	if protocolsCompatible(g.local, remote) {
		return nil
	}
	return fmt.Errorf("%s: member %q speaks peer protocol %d, this node (%q) %d; "+
		"nodes run side by side only when their versions differ by at most one (docs/compatibility.md)",
		incompatibleMsg, name, remote, g.self, g.local)
}

// checkAlive is memberlist's AliveDelegate: it refuses the alive message
// of an incompatible node, logging the refusal once per member and
// version at WARN. Metadata that does not decode is let through (upsert
// logs it and records the member without it), as before versions.
func (g *protocolGate) checkAlive(n *memberlist.Node) error {
	meta, _, err := decodeMeta(n.Meta)
	if err != nil {
		return nil
	}
	refused := g.refusal(n.Name, meta.Protocol)
	g.mu.Lock()
	last, seen := g.warned[n.Name]
	if refused == nil {
		delete(g.warned, n.Name)
	} else {
		if len(g.warned) >= maxWarned { // bounded: forget, and log again
			clear(g.warned)
		}
		g.warned[n.Name] = meta.Protocol
	}
	g.mu.Unlock()
	if refused != nil && (!seen || last != meta.Protocol) {
		g.log.Warn("cluster: member refused", "member", n.Name, "addr", addrString(n.Addr, n.Port), "err", refused)
	}
	return refused
}

// checkMerge refuses a join's push/pull whose other side knows a live
// node of an incompatible protocol.
func (g *protocolGate) checkMerge(peers []*memberlist.Node) error {
	for _, p := range peers {
		if p.State != memberlist.StateAlive && p.State != memberlist.StateSuspect {
			continue
		}
		meta, _, err := decodeMeta(p.Meta)
		if err != nil {
			continue
		}
		if err := g.refusal(p.Name, meta.Protocol); err != nil {
			return err
		}
	}
	return nil
}

var _ memberlist.AliveDelegate = events{}

// incompatible turns a join error that NotifyMerge caused into
// ErrIncompatibleProtocol with NotifyMerge's explanation.
func incompatible(err error) error {
	msg := err.Error()
	msg = msg[strings.Index(msg, incompatibleMsg)+len(incompatibleMsg):]
	msg = strings.TrimPrefix(msg, ": ")
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return fmt.Errorf("%w: %s", ErrIncompatibleProtocol, msg)
}
