// Package cluster owns gossip membership for a Sluice node: its identity in
// the cluster, joining, the metadata it advertises (its gRPC address,
// version and Raft advert: NodeMeta) and the membership snapshots the rest of the node builds its
// consistent-hash ring from. It is a thin layer over hashicorp/memberlist
// (SWIM gossip with Lifeguard suspicion) and imports nothing else of Sluice
// but internal/keyfile, which reads its gossip key file.
//
// # Lifecycle
//
//	c, err := cluster.New(cfg) // validates, binds the gossip port; joins nothing yet
//	go c.Run(ctx)              // joins the seeds, retrying; delivers OnChange snapshots
//	...
//	c.Leave(5 * time.Second)   // graceful stop, step 1: tell the others we go
//	// step 2: hand owned keys off to their new owners (c.Snapshot() no
//	//         longer lists this node, so a ring built from it names them)
//	cancel()                   // step 3: stop Run (it returns once its goroutines are done)
//	c.Shutdown()               // step 4: stop memberlist, close the port
//
// Leave comes first so that the other members stop routing to this node and
// compute the same new owners the handoff uses; memberlist keeps running
// during the handoff so that the leave message keeps being gossiped. A crash
// (Shutdown without Leave, or no Shutdown at all) is detected by the others'
// failure detector instead: the member is dropped once its suspicion times
// out, after a few seconds.
//
// New allocates the memberlist and its sockets and goroutines; Shutdown
// releases them and must always be called, whether or not Run ran. Several
// Clusters live in one process without interfering (there is no global state
// in this package), each on its own port; tests bind 127.0.0.1:0.
//
// # Snapshots
//
// A Snapshot is an immutable, versioned view of the live members, sorted by
// name. It is rebuilt from memberlist's join, leave and update notifications;
// Run hands every new one to Config.OnChange, serially, from its own
// goroutine, and Snapshot returns the current one at any time.
//
// Member fields are copied inside memberlist's notifications, while
// memberlist holds its node lock: that is the only race-free way to read
// them, because the *memberlist.Node pointers returned by
// Memberlist.Members are updated in place by memberlist
// (hashicorp/memberlist#306). This package never reads those pointers.
//
// # What memberlist does not tell
//
// memberlist v0.7.0 does not expose suspicion: Node.State is shadowed by an
// internal field and is always StateAlive in Members() and in every
// notification, and no delegate hears of a failed probe. Left and Dead are
// told apart by this package: Leave first gossips a "leaving" flag in the
// node metadata, so the others record Left rather than Dead when the
// node's leave message arrives.
//
// # Suspicion
//
// Suspect is therefore this node's own view. Run probes every other member
// twice per memberlist probe interval (every 150ms local, 500ms lan) with
// a probe message of its own, a memberlist user message sent over the
// gossip UDP port (encrypted like all gossip); the member's delegate
// answers with an ack, sent to the gossip address the ping carries (so a
// member that has not heard of the pinger yet, while a join spreads,
// answers too) if the ping names it (a node that took over a gone
// member's address does not answer for it). A member that has left
// SuspectAfterProbes (2) probes unanswered for a probe interval plus a
// probe timeout (550ms local, 1.5s lan) is Suspect in this node's table,
// snapshots (a new Version, delivered to OnChange) and State; its next
// ack, however late, makes it Alive again. A killed or cut-off member is
// thus suspect within about 0.6 to 0.9s local or 1.5 to 2.5s lan (measured
// on loopback under the race detector: 0.58 to 0.88s, and 1.5 to 2.3s),
// while memberlist takes several seconds more to declare it dead (its
// indirect probes, then its suspicion timeout), after which it leaves the
// snapshots.
//
// Two guards keep a healthy member from being suspected when the trouble
// is this node's: a probe round that starts late (its ticker missed a
// beat: the process was stalled or starved) suspects no one, since acks
// that arrived meanwhile may not have been handled yet; and when every
// member (two or more) is silent at once, none is suspected, since this
// node hearing from no one is more likely its own stall or isolation (the
// data path's circuit breakers cover a node cut off from all). An ack
// counts whenever it arrives, so a member slow to answer (up to the
// window less the probe interval) stays alive.
//
// Why not the alternatives:
//
//   - memberlist's PingDelegate hears only the acks of memberlist's own
//     probes, and memberlist probes one member per interval, round robin
//     over a shuffled list: a given member is probed only every n to 2n
//     intervals (20s on a lan of ten), too seldom to tell silence from
//     death quickly.
//   - Memberlist.Ping waits a fixed probe timeout (250ms local) and drops
//     a later ack: under the race detector on a loaded 2-core machine,
//     whole rounds of pings timed out and healthy members were suspected.
//   - The data path (transport's circuit breaker, the gRPC connection's
//     state) only learns of a dead peer by failing calls, each of which
//     spends its caller's deadline first; it needs no help to fail fast
//     once it knows (an open circuit rejects at once), and it must not be
//     fed back into the suspicion: a member suspected for its open circuit
//     would get no call to close it. The node shows a member whose circuit
//     is open as suspect too (see node), but only the probes here make the
//     limiter skip a member.
//
// The cost is one small UDP message and its ack per member every half
// probe interval on each node (2n(n-1) a second in all on a lan), on top
// of memberlist's own gossip. A member whose gossip UDP is dropped while
// its TCP passes (a misconfigured network, which memberlist logs as "Was
// able to connect ... over TCP but UDP probes failed") stays a member but
// is suspect here for as long as that lasts; MuteGossip makes exactly that
// fault, for tests.
//
// # Gossip encryption
//
// Config.GossipKeyFile turns on memberlist's encryption: every UDP message
// and TCP push/pull stream is sealed with AES-GCM under the primary key of
// a keyring, and anything not encrypted, or encrypted under a key this
// node does not hold, is dropped (GossipVerifyIncoming and
// GossipVerifyOutgoing). A node with another key, or with none, therefore
// cannot join, and cannot read or forge membership or metadata. The file
// holds one base64 key per line (16, 24 or 32 bytes: AES-128, -192, -256);
// the first is the primary, which encrypts, and every key decrypts (see
// LoadGossipKeyFile).
//
// Run watches the file's directory (an atomic rename, a symlink swap and a
// Kubernetes Secret's "..data" swap are all seen) and ReloadGossipKeys
// re-reads it on demand; the keyring is updated in place, without a
// restart. A bad file keeps the keyring in force. Rotate a key in three
// steps, each applied to every node before the next begins:
//
//  1. add the new key as a secondary (second line): every node now
//     decrypts both, and still encrypts with the old;
//  2. make the new key the primary (swap the lines): nodes that switched
//     send under the new key, which the others already accept;
//  3. remove the old key.
//
// Skipping step 1 splits the cluster for as long as the nodes disagree:
// a node that only knows the new key drops everything the others send.
//
// # Seeds and Kubernetes
//
// Config.Join lists "host:port" seeds. Every attempt resolves each host name
// anew with the system resolver and contacts every address it returns (a
// StatefulSet's headless Service returns one A record per pod), skipping this
// node's own address. Run retries every Config.JoinRetry until a seed answers
// or another member contacts this node, then re-contacts seeds that are not
// members every Config.Rejoin, which merges clusters that formed
// separately (pods that all started at once) and heals partitions that
// outlasted memberlist's own reconnection attempts.
//
// A join's first snapshot lists every member the seed listed, alive or
// suspect. memberlist merges the suspect entries of a seed's state only
// for nodes it already knows (Memberlist.suspectNode ignores the others),
// and a starved or partly cut-off seed suspects healthy members often; so
// the first join pushes and pulls state with each member the seed
// suspects that it still does not know, before the snapshot goes out. A
// member that answers is listed; one that does not within memberlist's TCP
// timeout (1s local, 10s lan; eight are contacted at once) is about to be
// declared dead, and is left out.
//
// For a StatefulSet, give the headless Service publishNotReadyAddresses:
// true (pods must gossip before they are ready), bind 0.0.0.0:7946 and set
// AdvertiseAddr to the pod IP (from the downward API), or leave it empty to
// let memberlist pick a private address of the pod.
package cluster
