package node

import (
	"sync"
	"time"

	"github.com/sluice-rl/sluice/api"
)

// configState records the last load of a reloaded configuration (the
// policy file, the RLS config) for the status page: when, and whether it
// was applied or refused. Safe for concurrent use.
type configState struct {
	mu     sync.Mutex
	at     time.Time
	result string
}

// record notes a load at now with its result ("loaded", "applied",
// "rejected: ...").
func (c *configState) record(now time.Time, result string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at, c.result = now, result
}

// view is the state as the status page shows it.
func (c *configState) view(name, source, hash string, rules int) api.ConfigState {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := api.ConfigState{Name: name, Source: source, Hash: hash, Rules: rules, LastResult: c.result}
	if !c.at.IsZero() {
		s.LastLoad = c.at.UTC().Format(time.RFC3339)
	}
	return s
}

// now is the node's clock (Config.Clock, else the wall clock).
func (n *Node) now() time.Time {
	if n.cfg.Clock != nil {
		return n.cfg.Clock()
	}
	return time.Now()
}

// configStates is the status page's view of the policies and the RLS
// config in force, each with the hash the node gossips (and the members
// table shows beside the other members').
func (n *Node) configStates() []api.ConfigState {
	set := n.policyCount()
	rlsHash, rlsRules := "", 0
	if c := n.rls.Config(); c != nil {
		rlsHash, rlsRules = n.RLSHash(), c.Rules()
	}
	return []api.ConfigState{
		n.policyState.view("policies", n.cfg.PolicyFile, n.PolicyHash(), set),
		n.rlsState.view("rls", n.cfg.RLSConfig, rlsHash, rlsRules),
	}
}

// policyCount is the number of policies in force.
func (n *Node) policyCount() int {
	if n.policyLoad == nil {
		return 0
	}
	return n.policyLoad.Set().Len()
}
