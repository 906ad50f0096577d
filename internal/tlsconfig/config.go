package tlsconfig

import (
	"context"
	"crypto/tls"
	"errors"
	"net"

	"google.golang.org/grpc/credentials"
)

// MinVersion is the lowest TLS version Sluice speaks.
const MinVersion = tls.VersionTLS12

// ServerConfig returns the configuration of a listener serving s's
// certificate. clientAuth is what it asks of clients: tls.NoClientCert, or
// tls.RequireAndVerifyClientCert (a certificate is required and verified
// against s's CA bundle, which must be set), or tls.VerifyClientCertIfGiven
// (one is asked for and, if given, verified against that bundle: the
// caller decides what to admit without one). nextProtos are the
// ALPN protocols ("h2" for gRPC; "h2", "http/1.1" for HTTP). The files are
// checked for changes at each handshake (see Config.CheckInterval).
func ServerConfig(s *Source, clientAuth tls.ClientAuthType, nextProtos ...string) *tls.Config {
	build := func(m *Material) *tls.Config {
		c := &tls.Config{
			MinVersion:   MinVersion,
			Certificates: []tls.Certificate{*m.Cert},
			NextProtos:   nextProtos,
		}
		if clientAuth != tls.NoClientCert {
			c.ClientAuth = clientAuth
			c.ClientCAs = m.Pool
		}
		return c
	}
	return &tls.Config{
		MinVersion: MinVersion,
		NextProtos: nextProtos,
		// Each handshake gets the material in force: a rotated
		// certificate or CA bundle applies to the next connection.
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return build(s.Current()), nil
		},
	}
}

// ClientConfig returns the configuration of one connection to a server
// named serverName: s's certificate as the client certificate (when
// withCert) and s's CA bundle as the roots (nil: the system's).
func ClientConfig(s *Source, serverName string, withCert bool) *tls.Config {
	m := s.Current()
	c := &tls.Config{MinVersion: MinVersion, ServerName: serverName, RootCAs: m.Pool}
	if withCert {
		c.Certificates = []tls.Certificate{*m.Cert}
	}
	return c
}

// ClientCredentials returns gRPC transport credentials that dial with s's
// certificate and verify the server against s's CA bundle, expecting
// serverName in its certificate (empty: the host dialed). Each new
// connection takes the material in force, so a rotation applies to the
// next connection without a restart.
func ClientCredentials(s *Source, serverName string) credentials.TransportCredentials {
	return &clientCreds{s: s, serverName: serverName}
}

// clientCreds builds fresh TLS credentials for each handshake.
type clientCreds struct {
	s          *Source
	serverName string
}

func (c *clientCreds) tls() credentials.TransportCredentials {
	return credentials.NewTLS(ClientConfig(c.s, c.serverName, true))
}

// ClientHandshake does the handshake with the material in force. The
// server is verified under serverName when set, whatever the address
// dialed: gRPC's TLS credentials take the name from the authority they
// are given, which is the address (a pod IP) unless overridden here.
func (c *clientCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if c.serverName != "" {
		authority = c.serverName
	}
	return c.tls().ClientHandshake(ctx, authority, conn)
}

// ServerHandshake is not supported: these are client credentials.
func (c *clientCreds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("tlsconfig: client credentials cannot serve")
}

// Info describes the protocol (TLS).
func (c *clientCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}

// Clone returns a copy.
func (c *clientCreds) Clone() credentials.TransportCredentials {
	cp := *c
	return &cp
}

// OverrideServerName sets the expected server name.
//
// Deprecated: as in gRPC, use grpc.WithAuthority.
func (c *clientCreds) OverrideServerName(name string) error {
	c.serverName = name
	return nil
}
