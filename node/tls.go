package node

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/sluice-rl/sluice/internal/clustersecret"
	"github.com/sluice-rl/sluice/internal/tlsconfig"
	"github.com/sluice-rl/sluice/transport"
)

// validateTLS checks that the TLS settings come in usable combinations;
// the files themselves are read by New (loadTLS).
func (c *Config) validateTLS() error {
	switch {
	case c.TLSCertFile == "" && c.TLSKeyFile != "":
		return fmt.Errorf("%w: TLSCertFile: required with TLSKeyFile", ErrInvalidConfig)
	case c.TLSCertFile != "" && c.TLSKeyFile == "":
		return fmt.Errorf("%w: TLSKeyFile: required with TLSCertFile", ErrInvalidConfig)
	case c.TLSClientCAFile != "" && c.TLSCertFile == "":
		return fmt.Errorf("%w: TLSClientCAFile: requires TLSCertFile and TLSKeyFile (mTLS is TLS with client certificates)", ErrInvalidConfig)
	case c.PeerTLSCertFile == "" && c.PeerTLSKeyFile != "":
		return fmt.Errorf("%w: PeerTLSCertFile: required with PeerTLSKeyFile", ErrInvalidConfig)
	case c.PeerTLSCertFile != "" && c.PeerTLSKeyFile == "":
		return fmt.Errorf("%w: PeerTLSKeyFile: required with PeerTLSCertFile", ErrInvalidConfig)
	}
	cert, _, ca := c.peerTLSFiles()
	switch {
	case cert.Path != "" && ca.Path == "":
		return fmt.Errorf("%w: PeerTLSCAFile: required when peer TLS is on (%s is set): the CA that verifies the other nodes (or set TLSClientCAFile)", ErrInvalidConfig, cert.Field)
	case cert.Path == "" && ca.Path != "":
		return fmt.Errorf("%w: PeerTLSCertFile: required with %s (or set TLSCertFile)", ErrInvalidConfig, ca.Field)
	}
	return nil
}

// peerTLSFiles resolves the peer TLS files, with their defaults, each
// named by the field it came from.
func (c *Config) peerTLSFiles() (cert, key, ca tlsconfig.File) {
	cert = tlsconfig.File{Path: c.PeerTLSCertFile, Field: "PeerTLSCertFile"}
	key = tlsconfig.File{Path: c.PeerTLSKeyFile, Field: "PeerTLSKeyFile"}
	ca = tlsconfig.File{Path: c.PeerTLSCAFile, Field: "PeerTLSCAFile"}
	if c.ClusterSecretFile != "" {
		// The secret is the peer identity unless peer TLS files are
		// given: no defaults from the public TLS.
		return cert, key, ca
	}
	if cert.Path == "" && key.Path == "" {
		cert = tlsconfig.File{Path: c.TLSCertFile, Field: "TLSCertFile (the default of PeerTLSCertFile)"}
		key = tlsconfig.File{Path: c.TLSKeyFile, Field: "TLSKeyFile (the default of PeerTLSKeyFile)"}
	}
	if ca.Path == "" {
		ca = tlsconfig.File{Path: c.TLSClientCAFile, Field: "TLSClientCAFile (the default of PeerTLSCAFile)"}
	}
	return cert, key, ca
}

// peerName is the DNS SAN of peer certificates.
func (c *Config) peerName() string {
	if c.PeerTLSName == "" {
		return tlsconfig.DefaultPeerName
	}
	return c.PeerTLSName
}

// security is a node's TLS material: nil sources are plaintext.
type security struct {
	public     *tlsconfig.Source // the public listeners; nil: plaintext
	clientAuth bool              // the public listeners require client certificates (mTLS)
	peer       *tlsconfig.Source // peer mTLS; nil: off
	peerAuth   *tlsconfig.PeerAuth
	secret     *clustersecret.Source // the cluster secret; nil: none (set by New)
}

// loadTLS reads the TLS files of cfg. Their check interval is in real
// time, not cfg.Clock (a test's fake clock would freeze reloads). Errors wrap ErrInvalidConfig and
// name the field.
func loadTLS(cfg Config, log *slog.Logger) (security, error) {
	var sec security
	var err error
	if cfg.TLSCertFile != "" {
		if sec.public, err = tlsconfig.New(tlsconfig.Config{
			Cert:          tlsconfig.File{Path: cfg.TLSCertFile, Field: "TLSCertFile"},
			Key:           tlsconfig.File{Path: cfg.TLSKeyFile, Field: "TLSKeyFile"},
			CA:            tlsconfig.File{Path: cfg.TLSClientCAFile, Field: "TLSClientCAFile"},
			CheckInterval: cfg.TLSCheckInterval,
			Logger:        log.With("listener", "public"),
		}); err != nil {
			return sec, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		sec.clientAuth = cfg.TLSClientCAFile != ""
	}
	cert, key, ca := cfg.peerTLSFiles()
	if cert.Path == "" {
		return sec, nil
	}
	if sec.peer, err = tlsconfig.New(tlsconfig.Config{
		Cert: cert, Key: key, CA: ca,
		CheckInterval: cfg.TLSCheckInterval,
		Logger:        log.With("listener", "peer"),
	}); err != nil {
		return sec, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	leaf := sec.peer.Current().Cert.Leaf
	if !slices.Contains(leaf.DNSNames, cfg.peerName()) {
		return sec, fmt.Errorf("%w: %s: certificate %q has no DNS SAN %q (PeerTLSName): the other nodes would refuse it",
			ErrInvalidConfig, cert.Field, leaf.Subject.String(), cfg.peerName())
	}
	sec.peerAuth = &tlsconfig.PeerAuth{
		Source:  sec.peer,
		Name:    cfg.peerName(),
		Service: transport.PeerServiceName,
		Logger:  log,
	}
	return sec, nil
}

// publicGRPCOptions are the credentials of the public gRPC server. With
// mTLS, a client certificate is required at the handshake, for every
// service, grpc.health.v1 included: the kubelet's gRPC probes present no
// certificate, so the probes are the HTTPS ones (see httpTLSConfig).
func (s security) publicGRPCOptions() []grpc.ServerOption {
	if s.public == nil {
		return nil
	}
	auth := tls.NoClientCert
	if s.clientAuth {
		auth = tls.RequireAndVerifyClientCert
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(tlsconfig.ServerConfig(s.public, auth, "h2")))}
}

// httpTLSConfig is the TLS configuration of the HTTP listener; nil
// without TLS. With mTLS, the handshake asks for a client certificate and
// verifies it if given (an untrusted one fails the handshake), but lets a
// client without one in: the handler (api.HTTPConfig.RequireClientCert)
// then answers only the probes, /healthz and /readyz, which the kubelet
// calls without a certificate, and 401 on every other path.
func (s security) httpTLSConfig() *tls.Config {
	if s.public == nil {
		return nil
	}
	auth := tls.NoClientCert
	if s.clientAuth {
		auth = tls.VerifyClientCertIfGiven
	}
	return tlsconfig.ServerConfig(s.public, auth, "h2", "http/1.1")
}

// peerServerOptions are the credentials and interceptors of the peer
// server: mTLS against the peer CA where peer TLS is configured (with a
// cluster secret too, the secret then keys only the gossip), else TLS with
// the cluster secret's identity; only peers admitted.
func (s security) peerServerOptions() []grpc.ServerOption {
	if s.peer == nil {
		if s.secret != nil {
			// The handshake admits only holders of an accepted secret.
			return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(s.secret.ServerConfig()))}
		}
		return nil
	}
	return []grpc.ServerOption{
		grpc.Creds(credentials.NewTLS(tlsconfig.ServerConfig(s.peer, tls.RequireAndVerifyClientCert, "h2"))),
		grpc.ChainUnaryInterceptor(s.peerAuth.Unary()),
		grpc.ChainStreamInterceptor(s.peerAuth.Stream()),
	}
}

// peerDialOptions are the credentials of the connections to peers.
func (s security) peerDialOptions() []grpc.DialOption {
	if s.peer == nil {
		if s.secret != nil {
			return []grpc.DialOption{grpc.WithTransportCredentials(s.secret.ClientCredentials())}
		}
		return nil
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(tlsconfig.ClientCredentials(s.peer, s.peerAuth.Name))}
}
