package cluster

import (
	"bytes"
	"fmt"
	"net"

	"github.com/hashicorp/memberlist"
)

// ErrAlone is wrapped by the error with which a node alone
// (Config.Alone) refuses another node.
var ErrAlone = fmt.Errorf("cluster: this node is a cluster of one and refuses members (it has no cluster authentication)")

// Refusals counts what this node's gossip refused.
type Refusals struct {
	// Undecrypted counts gossip messages and streams refused because no
	// key of the keyring decrypted them (a node with another key or none:
	// a join attempt with a wrong key, say).
	Undecrypted uint64
	// Alone counts the joins and the gossip about other nodes a node
	// alone (Config.Alone) refused.
	Alone uint64
}

// Refusals returns the counts of what this node's gossip refused.
func (c *Cluster) Refusals() Refusals {
	return Refusals{Undecrypted: c.undecrypted.Load(), Alone: c.refusedAlone.Load()}
}

// refuseAlone logs and counts a node alone's refusal of n, and returns
// its error.
func (c *Cluster) refuseAlone(n *memberlist.Node) error {
	c.refusedAlone.Add(1)
	addr := addrString(n.Addr, n.Port)
	c.log.Warn("cluster: member refused: this node is a cluster of one without cluster authentication",
		"member", n.Name, "addr", addr)
	return fmt.Errorf("%w: %q at %s", ErrAlone, n.Name, addr)
}

// undecryptedMarks are the parts of memberlist's log lines that say it
// refused a message no installed key decrypted, or a message in clear
// text while encryption is required, or an encrypted one without
// encryption.
var undecryptedMarks = [][]byte{
	[]byte("no installed keys could decrypt"),
	[]byte("Decrypt packet failed"),
	[]byte("remote state is not encrypted"),
	[]byte("encryption is not configured"),
}

// noteMemberlistLine counts and logs (WARN, one stable message) a line of
// memberlist's log that reports gossip refused for its key, naming the
// sender's address ("from=ip:port" in memberlist's line).
func (c *Cluster) noteMemberlistLine(line []byte) {
	for _, m := range undecryptedMarks {
		if !bytes.Contains(line, m) {
			continue
		}
		c.undecrypted.Add(1)
		from := ""
		if i := bytes.LastIndex(line, []byte("from=")); i >= 0 {
			from = string(bytes.TrimSpace(line[i+len("from="):]))
		}
		c.log.Warn("cluster: gossip refused: not encrypted with an accepted key", "from", from, "reason", string(m))
		return
	}
}

// refuseAll makes t, on a node alone, take every incoming stream and
// packet in memberlist's stead: streams (a join's push/pull) are closed
// and refused(from) called, so the joiner's join fails; packets (probes,
// gossip) are dropped. Shutdown stops it.
func (t *muteTransport) refuseAll(refused func(from string)) {
	t.alone = true
	t.stop = make(chan struct{})
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		for {
			select {
			case <-t.stop:
				return
			case conn := <-t.NetTransport.StreamCh():
				refused(conn.RemoteAddr().String())
				_ = conn.Close()
			case <-t.NetTransport.PacketCh():
			}
		}
	}()
}

// StreamCh is memberlist's stream channel; on a node alone, one that
// never delivers (refuseAll takes the streams).
func (t *muteTransport) StreamCh() <-chan net.Conn {
	if t.alone {
		return nil
	}
	return t.NetTransport.StreamCh()
}

// PacketCh is memberlist's packet channel; on a node alone, one that
// never delivers (refuseAll drops the packets).
func (t *muteTransport) PacketCh() <-chan *memberlist.Packet {
	if t.alone {
		return nil
	}
	return t.NetTransport.PacketCh()
}

// Shutdown closes the listeners, then stops refuseAll (which drains them
// until they are closed). Idempotent.
func (t *muteTransport) Shutdown() error {
	var err error
	t.once.Do(func() {
		err = t.NetTransport.Shutdown()
		if t.stop != nil {
			close(t.stop)
			t.wg.Wait()
		}
	})
	return err
}

// refuseStream logs and counts a stream a node alone refused.
func (c *Cluster) refuseStream(from string) {
	c.refusedAlone.Add(1)
	c.log.Warn("cluster: member refused: this node is a cluster of one without cluster authentication", "addr", from)
}
