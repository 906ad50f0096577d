package clustersecret

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc/credentials"
)

// ErrNotPeer is wrapped by the handshake error of a peer whose
// certificate is not derived from an accepted secret.
var ErrNotPeer = errors.New("clustersecret: not a peer: its certificate is not derived from an accepted cluster secret")

// verify accepts a peer only if its leaf certificate's public key is
// derived from one of the accepted secrets in force. TLS 1.3 has already
// checked that the peer holds the matching private key.
func (s *Source) verify(rawCerts [][]byte, _ [][]*x509.Certificate) error {
	if len(rawCerts) == 0 {
		return fmt.Errorf("%w: no certificate", ErrNotPeer)
	}
	leaf, err := x509.ParseCertificate(rawCerts[0])
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotPeer, err)
	}
	pub, ok := leaf.PublicKey.(ed25519.PublicKey)
	if !ok || !s.cur.Load().accepts(pub) {
		return ErrNotPeer
	}
	return nil
}

// config is the TLS configuration of one handshake with the material in
// force: the primary's certificate, and the other side admitted only by
// verify.
func (s *Source) config() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{*s.cur.Load().Cert},
		NextProtos:   []string{"h2"},
		ServerName:   PeerName,
		// The chain is not verified against a CA: there is none. verify
		// pins the public key instead.
		InsecureSkipVerify:    true,
		ClientAuth:            tls.RequireAnyClientCert,
		VerifyPeerCertificate: s.verify,
	}
}

// ServerConfig returns the TLS configuration of the peer listener: TLS
// 1.3, the primary's certificate, a client certificate required and
// admitted only if derived from an accepted secret. Each handshake takes
// the secrets in force, so a rotation applies to the next connection.
func (s *Source) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{"h2"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.config(), nil
		},
	}
}

// ClientCredentials returns the gRPC credentials of the connections to
// peers: the primary's certificate as the client certificate, the server
// admitted only if derived from an accepted secret.
func (s *Source) ClientCredentials() credentials.TransportCredentials {
	return &clientCreds{s: s}
}

// clientCreds builds fresh TLS credentials for each handshake.
type clientCreds struct{ s *Source }

// ClientHandshake does the handshake with the secrets in force.
func (c *clientCreds) ClientHandshake(ctx context.Context, _ string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return credentials.NewTLS(c.s.config()).ClientHandshake(ctx, PeerName, conn)
}

// ServerHandshake is not supported: these are client credentials.
func (c *clientCreds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("clustersecret: client credentials cannot serve")
}

// Info describes the protocol (TLS).
func (c *clientCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}

// Clone returns a copy.
func (c *clientCreds) Clone() credentials.TransportCredentials { cp := *c; return &cp }

// OverrideServerName does nothing: peers are named PeerName.
//
// Deprecated: as in gRPC, use grpc.WithAuthority.
func (c *clientCreds) OverrideServerName(string) error { return nil }
