// Package testcerts makes certificates for tests: a CA, and server, client
// and peer certificates it signs, as PEM files in a test's directory.
// ECDSA P-256 keys, so that making them is fast.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority for tests.
type CA struct {
	// Cert is the CA certificate.
	Cert *x509.Certificate
	// PEM is Cert in PEM.
	PEM []byte
	key *ecdsa.PrivateKey
}

// Options describe a certificate to issue.
type Options struct {
	// CommonName is the subject's CN.
	CommonName string
	// DNSNames and IPs are the SANs. Server certificates for loopback
	// tests want "localhost" and 127.0.0.1.
	DNSNames []string
	IPs      []net.IP
	// Server and Client set the extended key usages.
	Server, Client bool
	// NotAfter is the expiry; zero means in 24 hours.
	NotAfter time.Time
}

// Pair is an issued certificate and key, in PEM.
type Pair struct {
	// Cert and Key are PEM.
	Cert, Key []byte
	// Leaf is the parsed certificate.
	Leaf *x509.Certificate
}

// NewCA makes a self-signed CA.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}
}

// Issue signs a certificate described by o.
func (ca *CA) Issue(t testing.TB, o Options) Pair {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: o.CommonName},
		DNSNames:     o.DNSNames,
		IPAddresses:  o.IPs,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     o.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	}
	if o.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if o.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Pair{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
		Leaf: leaf,
	}
}

// Server issues a server certificate for localhost and 127.0.0.1 (and
// the extra DNS names).
func (ca *CA) Server(t testing.TB, dns ...string) Pair {
	return ca.Issue(t, Options{CommonName: "server", Server: true,
		DNSNames: append([]string{"localhost"}, dns...), IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
}

// Client issues a client certificate.
func (ca *CA) Client(t testing.TB, cn string) Pair {
	return ca.Issue(t, Options{CommonName: cn, Client: true})
}

// Peer issues a peer certificate: server and client usages and the peer
// name as its only SAN, so that a peer dialed at an address is verified
// by name.
func (ca *CA) Peer(t testing.TB, cn, peerName string) Pair {
	return ca.Issue(t, Options{CommonName: cn, Server: true, Client: true, DNSNames: []string{peerName}})
}

// PeerAndServer issues a certificate for both listeners of a node: the
// peer name, localhost and 127.0.0.1, server and client usages.
func (ca *CA) PeerAndServer(t testing.TB, cn, peerName string) Pair {
	return ca.Issue(t, Options{CommonName: cn, Server: true, Client: true,
		DNSNames: []string{peerName, "localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
}

// Write writes data to dir/name and returns the path.
func Write(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// WritePair writes p as dir/name.crt and dir/name.key and returns the
// paths.
func WritePair(t testing.TB, dir, name string, p Pair) (cert, key string) {
	t.Helper()
	return Write(t, dir, name+".crt", p.Cert), Write(t, dir, name+".key", p.Key)
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// ClientConfig is a client's TLS configuration that trusts the CAs in
// roots (PEM) and presents pair (none if nil).
func ClientConfig(t testing.TB, roots []byte, pair *Pair) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(roots)
	cfg := &tls.Config{RootCAs: pool}
	if pair != nil {
		c, err := tls.X509KeyPair(pair.Cert, pair.Key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg
}
