package xds_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/sluice-rl/sluice/internal/testcerts"
	"github.com/sluice-rl/sluice/rls"
	"github.com/sluice-rl/sluice/rls/xds"
	"github.com/sluice-rl/sluice/rls/xds/xdstest"
)

// Every invalid setting is an error naming its field.
func TestSettingsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, field string
		edit        func(*xds.Settings)
	}{
		{"empty server", "ServerURL", func(s *xds.Settings) { s.ServerURL = " " }},
		{"empty node id", "NodeID", func(s *xds.Settings) { s.NodeID = "" }},
		{"zero retry", "ConnectRetryInterval", func(s *xds.Settings) { s.ConnectRetryInterval = 0 }},
		{"negative backoff", "BackoffInitial", func(s *xds.Settings) { s.BackoffInitial = -time.Second }},
		{"max below initial", "BackoffMax", func(s *xds.Settings) { s.BackoffMax = time.Second }},
		{"negative max message", "MaxRecvBytes", func(s *xds.Settings) { s.MaxRecvBytes = -1 }},
		{"cert without key", "TLSKeyFile", func(s *xds.Settings) { s.UseTLS, s.TLSCertFile = true, "c.pem" }},
		{"TLS files without TLS", "UseTLS", func(s *xds.Settings) { s.TLSCAFile = "ca.pem" }},
		{"metadata without =", "NodeMetadata", func(s *xds.Settings) { s.NodeMetadata = "a=1,b" }},
		{"metadata empty key", "NodeMetadata", func(s *xds.Settings) { s.NodeMetadata = "=1" }},
		{"header without :", "Headers", func(s *xds.Settings) { s.Headers = "x-a:1,x-b" }},
		{"missing CA file", "TLSCAFile", func(s *xds.Settings) { s.UseTLS, s.TLSCAFile = true, "/nonexistent/ca.pem" }},
		{"missing cert file", "TLSCertFile", func(s *xds.Settings) {
			s.UseTLS, s.TLSCertFile, s.TLSKeyFile = true, "/nonexistent/c.pem", "/nonexistent/k.pem"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := xds.DefaultSettings()
			tc.edit(&s)
			_, err := xds.New(xds.Config{Settings: s, Apply: func(*rls.Config) {}})
			if !errors.Is(err, xds.ErrInvalidSettings) || !strings.Contains(err.Error(), tc.field+":") && !strings.Contains(err.Error(), tc.field+" (") {
				t.Errorf("err = %v, want ErrInvalidSettings naming %s", err, tc.field)
			}
		})
	}
}

// The reference's pairs: key=value metadata, key:value headers.
func TestParsePairs(t *testing.T) {
	got, err := xds.ParsePairs("a=1, b = two=2 ,c=", '=')
	if err != nil || len(got) != 3 || got["a"] != "1" || got["b"] != "two=2" || got["c"] != "" {
		t.Errorf("ParsePairs = %v, %v", got, err)
	}
	if got, err := xds.ParsePairs("", ':'); err != nil || len(got) != 0 {
		t.Errorf("ParsePairs(\"\") = %v, %v", got, err)
	}
}

// Over mTLS: the client verifies the server with the CA file and the
// server name, and presents its certificate, which the server requires.
func TestClientTLS(t *testing.T) {
	ca := testcerts.NewCA(t, "xds-ca")
	dir := t.TempDir()
	server := ca.Issue(t, testcerts.Options{CommonName: "xds", DNSNames: []string{"xds.example"}, Server: true})
	cert, err := tls.X509KeyPair(server.Cert, server.Key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	srv := xdstest.Start(t, "sluice-test", grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})))
	srv.Push(t, "1", perSecond("edge", "ip", 10))
	certFile, keyFile := testcerts.WritePair(t, dir, "client", ca.Client(t, "sluice"))
	caFile := testcerts.Write(t, dir, "ca.pem", ca.PEM)
	c, _ := startClient(t, srv, func(s *xds.Settings) {
		s.UseTLS, s.TLSCAFile, s.TLSCertFile, s.TLSKeyFile, s.TLSServerName = true, caFile, certFile, keyFile, "xds.example"
	})
	srv.WaitAcked(t, "1")
	if c.Config() == nil {
		t.Error("no config over TLS")
	}
}
