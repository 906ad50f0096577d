package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrNameTaken is returned by Run when this node's join finds its
// NodeName used by a live member at another address: the cluster would
// ignore this node, so it must not start under that name.
var ErrNameTaken = errors.New("cluster: node name taken")

// nameTakenMsg starts the error of NotifyMerge; memberlist's Join returns
// it as text only.
const nameTakenMsg = "node name taken"

// errNoSeeds reports that the seeds resolved to no address worth
// contacting: none at all, only this node's, or (when rejoining) only
// members'.
var errNoSeeds = errors.New("cluster: no seed address to contact")

// joinLoop joins the seeds of Config.Join, retrying, then rejoins
// periodically; see Run. It runs in a goroutine owned by Run and returns
// when ctx is done, Shutdown or Leave is called, or (with rejoining
// disabled) once joined; or with an error wrapping ErrNameTaken when a
// seed's cluster has a live member of this node's name.
func (c *Cluster) joinLoop(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		if c.stopJoining(ctx) {
			return nil
		}
		if c.hasPeers() {
			c.log.Info("cluster: joined: contacted by another member")
			c.joined.Store(true)
			break
		}
		n, err := c.joinSeeds(ctx, false)
		if err != nil && strings.Contains(err.Error(), nameTakenMsg) {
			return nameTaken(err)
		}
		if err != nil && strings.Contains(err.Error(), incompatibleMsg) {
			return incompatible(err)
		}
		if n > 0 {
			c.log.Info("cluster: joined", "contacted", n, "attempts", attempt)
			c.joined.Store(true)
			break
		}
		if errors.Is(err, errNoSeeds) && attempt >= 3 && !c.joined.Load() {
			// The seeds keep resolving to this node alone (a cluster of
			// one, e.g. a single-replica StatefulSet): serve as one, and
			// keep looking for others below.
			c.log.Info("cluster: no other seed found; serving as a cluster of one until one appears")
			c.joined.Store(true)
		}
		level := slog.LevelDebug
		if attempt == 1 {
			level = slog.LevelInfo
		}
		c.log.Log(ctx, level, "cluster: join attempt failed", "attempt", attempt, "retry", c.cfg.JoinRetry, "err", err)
		if !c.wait(ctx, c.cfg.JoinRetry) {
			return nil
		}
	}

	if c.cfg.Rejoin <= 0 {
		return nil
	}
	for c.wait(ctx, c.cfg.Rejoin) {
		if c.stopJoining(ctx) {
			return nil
		}
		n, err := c.joinSeeds(ctx, true)
		switch {
		case n > 0:
			c.log.Info("cluster: rejoined seeds that were not members", "contacted", n)
		case err != nil && strings.Contains(err.Error(), nameTakenMsg):
			// A joined node keeps serving: the seed's cluster (another
			// one, since the seed was not a member) has a node of this
			// name, and refused the merge.
			c.log.Warn("cluster: a seed's cluster has a node of this name; not merged", "err", err)
		case !errors.Is(err, errNoSeeds):
			c.log.Debug("cluster: rejoin attempt failed", "err", err)
		}
	}
	return nil
}

// nameTaken turns a join error that NotifyMerge caused into ErrNameTaken
// with NotifyMerge's explanation (memberlist's Join joins the errors of
// every seed as text).
func nameTaken(err error) error {
	msg := err.Error()
	msg = msg[strings.Index(msg, nameTakenMsg)+len(nameTakenMsg):]
	msg = strings.TrimPrefix(msg, ": ")
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return fmt.Errorf("%w: %s", ErrNameTaken, msg)
}

// stopJoining reports whether joining must stop.
func (c *Cluster) stopJoining(ctx context.Context) bool {
	return ctx.Err() != nil || c.isDone() || c.left.Load()
}

// wait waits for d and reports whether to go on (false once ctx is done or
// Shutdown called).
func (c *Cluster) wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-c.done:
		return false
	case <-t.C:
		return true
	}
}

// hasPeers reports whether a member other than this node is known.
func (c *Cluster) hasPeers() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name := range c.members {
		if name != c.name {
			return true
		}
	}
	return false
}

// joinSeeds resolves the seeds and asks memberlist to push/pull state with
// every resulting address except this node's own (and, if strangersOnly,
// except current members'). It returns how many answered; the error
// explains a zero.
func (c *Cluster) joinSeeds(ctx context.Context, strangersOnly bool) (int, error) {
	addrs, resolveErr := c.seedAddrs(ctx)

	var known map[string]bool
	if strangersOnly {
		c.mu.Lock()
		known = make(map[string]bool, len(c.members))
		for _, m := range c.members {
			known[m.GossipAddr] = true
		}
		c.mu.Unlock()
	}
	targets := addrs[:0]
	for _, a := range addrs {
		if !c.self[a] && !known[a] {
			targets = append(targets, a)
		}
	}
	if len(targets) == 0 {
		return 0, errors.Join(errNoSeeds, resolveErr)
	}

	// Every target is an IP address, so memberlist resolves nothing itself.
	// Run holds snapshots during a first join (see joinGen); a rejoin,
	// which may wait on a seed that does not answer while members change,
	// does not.
	if !strangersOnly {
		c.joinGen.Add(1)
		defer func() {
			c.joinGen.Add(1)
			c.signal()
		}()
	}
	if !strangersOnly {
		c.mu.Lock()
		c.joinSuspects = make(map[string]string)
		c.mu.Unlock()
	}
	n, err := c.ml.Join(targets)
	if !strangersOnly {
		c.mu.Lock()
		suspects := c.joinSuspects
		c.joinSuspects = nil
		c.mu.Unlock()
		if n > 0 {
			c.contactSuspects(ctx, suspects)
		}
	}
	if n > 0 {
		return n, nil
	}
	return 0, errors.Join(err, resolveErr)
}

// maxSuspectContacts bounds how many members contactSuspects contacts at
// once.
const maxSuspectContacts = 8

// contactSuspects pushes and pulls state with each member of suspects
// (name -> gossip address: the members a seed reported suspect during
// this node's first join) that this node still does not know, all at once
// (maxSuspectContacts at a time), and waits for them. It runs inside the
// join, so Run still holds snapshots.
//
// memberlist merges a seed's suspect entry only for a node it already
// knows (Memberlist.suspectNode ignores the others), so without this a
// joiner learns a member the seed suspects only when the member's
// refutation or its own push/pull happens to reach it, later: its first
// snapshot would lack a member the rest of the cluster still lists, and a
// ring built from it would name wrong owners. A suspect member that
// answers is merged from its own state, alive; one that does not (it is
// about to be declared dead) is left out after memberlist's TCP timeout.
func (c *Cluster) contactSuspects(ctx context.Context, suspects map[string]string) {
	c.mu.Lock()
	for name := range suspects {
		if _, ok := c.members[name]; ok || name == c.name {
			delete(suspects, name)
		}
	}
	c.mu.Unlock()
	if len(suspects) == 0 {
		return
	}
	var (
		wg       sync.WaitGroup
		slots    = make(chan struct{}, maxSuspectContacts)
		answered atomic.Int64
	)
	for name, addr := range suspects {
		slots <- struct{}{}
		if c.stopJoining(ctx) {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			if n, err := c.ml.Join([]string{addr}); n > 0 {
				answered.Add(1)
			} else {
				c.log.Debug("cluster: a member the seed suspects did not answer", "member", name, "addr", addr, "err", err)
			}
		}()
	}
	wg.Wait()
	c.log.Info("cluster: contacted the members the seed suspects", "suspects", len(suspects), "answered", answered.Load())
}

// seedAddrs resolves Config.Join to "ip:port" addresses, without
// duplicates, in order. A host name yields every address the resolver
// returns. Names that do not resolve are reported in the error and
// skipped.
//
// memberlist.Join would resolve names too, and would contact every address
// too, but it first tries a TCP "ANY" query to the first server of
// /etc/resolv.conf for names with a dot and uses its answer, if any, as
// the whole answer; ANY queries are answered partially or refused by many
// servers (RFC 8482). The system resolver (search domains, /etc/hosts,
// A and AAAA queries) is what a Kubernetes headless Service expects, and
// honours ctx.
func (c *Cluster) seedAddrs(ctx context.Context) ([]string, error) {
	var (
		addrs []string
		seen  = make(map[string]bool)
		errs  []error
	)
	add := func(ip net.IP, port uint16) {
		a := addrString(ip, port)
		if !seen[a] {
			seen[a] = true
			addrs = append(addrs, a)
		}
	}
	for _, seed := range c.cfg.Join {
		host, port, err := parseSeed(seed) // validated by New
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ip := net.ParseIP(host); ip != nil {
			add(ip, port)
			continue
		}
		hosts, err := net.DefaultResolver.LookupHost(ctx, host)
		if err != nil {
			errs = append(errs, fmt.Errorf("resolve seed %q: %w", seed, err))
			continue
		}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil { // skips zoned IPv6 addresses
				add(ip, port)
			}
		}
	}
	return addrs, errors.Join(errs...)
}

// selfAddrs returns the addresses at which this node may appear in a seed
// list: its advertised address, and the bound address, or when bound to
// all interfaces every address of this host, with the bound port. Joining
// one of them would "succeed" with no one but this node.
func selfAddrs(advertised string, bindIP net.IP, bindPort uint16) map[string]bool {
	self := map[string]bool{advertised: true}
	if bindIP != nil && !bindIP.IsUnspecified() {
		self[addrString(bindIP, bindPort)] = true
		return self
	}
	ifAddrs, _ := net.InterfaceAddrs() // best effort: without them, the advertised address
	for _, a := range ifAddrs {
		if ipNet, ok := a.(*net.IPNet); ok {
			self[addrString(ipNet.IP, bindPort)] = true
		}
	}
	return self
}
