package node

import (
	"errors"
	"fmt"
	"net"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/api"
	"github.com/sluice-rl/sluice/internal/clustersecret"
)

// authMode is how a node authenticates its cluster: its peer calls and its
// gossip.
type authMode int

const (
	// authSecret: a cluster secret (Config.ClusterSecretFile) derives the
	// gossip keys and, unless peer mTLS is configured too (then the peer
	// port runs mTLS against the peer CA), the peer port's TLS identity.
	authSecret authMode = iota
	// authPeerTLS: peer mTLS against a peer CA (Config.PeerTLSCertFile or
	// its default); gossip is encrypted only with Config.GossipKeyFile.
	authPeerTLS
	// authInsecure: none, by choice (Config.Insecure).
	authInsecure
	// authAlone: none, and no Join list: a cluster of one, its peer and
	// gossip listeners on loopback, refusing members.
	authAlone
)

func (m authMode) String() string {
	return [...]string{"cluster-secret", "peer-mtls", "insecure", "alone"}[m]
}

// ErrNoClusterAuth is wrapped by the error of New for a node that joins
// others without cluster authentication.
var ErrNoClusterAuth = errors.New("node: no cluster authentication")

// clusterAuth decides the node's authMode from cfg, and for authAlone
// returns cfg with its peer and gossip listeners moved to loopback (the
// same ports). A node with a Join list and no authentication is an error
// naming the settings that give one.
func (c Config) clusterAuth() (Config, authMode, error) {
	cert, _, _ := c.peerTLSFiles()
	switch {
	case c.Insecure && (c.ClusterSecretFile != "" || cert.Path != ""):
		return c, 0, fmt.Errorf("%w: Insecure: not with ClusterSecretFile or peer mTLS (%s): the cluster is authenticated", ErrInvalidConfig, cert.Field)
	case c.ClusterSecretFile != "" && c.GossipKeyFile != "":
		return c, 0, fmt.Errorf("%w: ClusterSecretFile: not with GossipKeyFile: the cluster secret derives the gossip keys", ErrInvalidConfig)
	case c.ClusterSecretFile != "":
		return c, authSecret, nil
	case cert.Path != "":
		return c, authPeerTLS, nil
	case c.Insecure:
		return c, authInsecure, nil
	case len(c.Join) > 0:
		return c, 0, fmt.Errorf("%w: %w: Join: a node that joins others needs cluster authentication: "+
			"set ClusterSecretFile (env SLUICE_CLUSTER_SECRET_FILE: a file of `openssl rand -base64 32`, the same on every node), "+
			"or peer mTLS (PeerTLSCertFile, PeerTLSKeyFile, PeerTLSCAFile), or Insecure to run without (anyone who reaches the peer and gossip ports can then join and change counters)",
			ErrInvalidConfig, ErrNoClusterAuth)
	}
	var err error
	if c.PeerAddr, err = loopback(c.PeerAddr); err != nil {
		return c, 0, fmt.Errorf("%w: PeerAddr: %w", ErrInvalidConfig, err)
	}
	if c.GossipAddr, err = loopback(c.GossipAddr); err != nil {
		return c, 0, fmt.Errorf("%w: GossipAddr: %w", ErrInvalidConfig, err)
	}
	return c, authAlone, nil
}

// loopback returns addr with its host replaced by 127.0.0.1.
func loopback(addr string) (string, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", port), nil
}

// logClusterAuth says at start how the cluster is authenticated: a WARN
// for Insecure (at every start), an INFO for a node alone.
func (n *Node) logClusterAuth() {
	switch n.auth {
	case authInsecure:
		n.log.Warn("cluster: INSECURE: peer calls and gossip are not authenticated (--insecure): anyone who reaches the peer and gossip ports can join, read and change counters; set --cluster-secret-file",
			"peer", n.PeerAddr(), "gossip", n.GossipAddr())
	case authAlone:
		n.log.Info("cluster: a cluster of one: no cluster secret, so the peer and gossip ports listen on loopback only and other nodes are refused; to cluster, give every node the same --cluster-secret-file (openssl rand -base64 32) and --join",
			"peer", n.PeerAddr(), "gossip", n.GossipAddr())
	default:
		n.log.Info("cluster: authenticated", "mode", n.auth.String())
	}
}

// registerClusterAuthMetrics exports sluice_insecure, the cluster
// secret's reloads (sluice_cluster_secret_reloads_total{result}) and what
// gossip refused (sluice_gossip_refused_total{reason}).
func (n *Node) registerClusterAuthMetrics(reg prometheus.Registerer) error {
	secret := func(rejected bool) func() float64 {
		return func() float64 {
			if n.sec.secret == nil {
				return 0
			}
			s := n.sec.secret.Status()
			if rejected {
				return float64(s.Rejected)
			}
			return float64(s.Reloads)
		}
	}
	refused := func(alone bool) func() float64 {
		return func() float64 {
			r := n.cluster.Refusals()
			if alone {
				return float64(r.Alone)
			}
			return float64(r.Undecrypted)
		}
	}
	const reloadsHelp = "Re-reads of the cluster secret file that changed the secrets (applied) or were refused, keeping them (rejected)."
	const refusedHelp = "Gossip refused: messages no accepted key decrypted (key: a node with another secret or key, or none), joins to a node alone (alone)."
	cs := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_insecure",
			Help: "1 when the node runs its cluster without authentication (--insecure), else 0.",
		}, func() float64 {
			if n.auth == authInsecure {
				return 1
			}
			return 0
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_cluster_secret_reloads_total", Help: reloadsHelp,
			ConstLabels: prometheus.Labels{"result": "applied"}}, secret(false)),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_cluster_secret_reloads_total", Help: reloadsHelp,
			ConstLabels: prometheus.Labels{"result": "rejected"}}, secret(true)),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_gossip_refused_total", Help: refusedHelp,
			ConstLabels: prometheus.Labels{"reason": "key"}}, refused(false)),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_gossip_refused_total", Help: refusedHelp,
			ConstLabels: prometheus.Labels{"reason": "alone"}}, refused(true)),
	}
	for _, col := range cs {
		if err := reg.Register(col); err != nil {
			return err
		}
	}
	return nil
}

// membershipOptions mark the Membership answers of an Insecure node.
func (n *Node) membershipOptions() []api.MembershipOption {
	if n.auth == authInsecure {
		return []api.MembershipOption{api.MembershipInsecure()}
	}
	return nil
}

// loadSecret reads the cluster secret file of n's config, if any; a
// change of the file installs the new gossip keys (secretChanged).
func (n *Node) loadSecret() (*clustersecret.Source, error) {
	if n.cfg.ClusterSecretFile == "" {
		return nil, nil
	}
	s, err := clustersecret.NewSource(n.cfg.ClusterSecretFile, n.secretChanged, n.log)
	if err != nil {
		return nil, fmt.Errorf("%w: ClusterSecretFile: %w", ErrInvalidConfig, err)
	}
	return s, nil
}

// secretChanged installs the gossip keys of a reloaded cluster secret in
// place; the peer port takes the new secrets at its next handshake.
func (n *Node) secretChanged(m *clustersecret.Material) {
	if err := n.cluster.SetGossipKeys(m.GossipKeys); err != nil {
		n.log.Error("cluster secret: gossip keys not installed", "err", err)
	}
}
