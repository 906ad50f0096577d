package tlsconfig_test

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/testcerts"
	"github.com/sluice-rl/sluice/internal/tlsconfig"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func files(dir string) tlsconfig.Config {
	return tlsconfig.Config{
		Cert: tlsconfig.File{Path: filepath.Join(dir, "tls.crt"), Field: "TLSCertFile"},
		Key:  tlsconfig.File{Path: filepath.Join(dir, "tls.key"), Field: "TLSKeyFile"},
		CA:   tlsconfig.File{Path: filepath.Join(dir, "ca.crt"), Field: "TLSClientCAFile"},
	}
}

func TestReloadOnChange(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "ca")
	first := ca.Server(t)
	testcerts.WritePair(t, dir, "tls", first)
	testcerts.Write(t, dir, "ca.crt", ca.PEM)
	clk := &fakeClock{now: time.Unix(1e9, 0)}
	cfg := files(dir)
	cfg.Clock = clk.Now
	s, err := tlsconfig.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Current().Cert.Leaf.SerialNumber; got.Cmp(first.Leaf.SerialNumber) != 0 {
		t.Fatalf("serial %v, want the first", got)
	}
	second := ca.Server(t)
	// Half a rotation: the new certificate with the old key must not be
	// taken, nor break anything.
	testcerts.Write(t, dir, "tls.crt", second.Cert)
	clk.Add(2 * time.Second)
	if got := s.Current().Cert.Leaf.SerialNumber; got.Cmp(first.Leaf.SerialNumber) != 0 {
		t.Fatalf("after a half-written rotation: serial %v, want the first still", got)
	}
	testcerts.Write(t, dir, "tls.key", second.Key)
	// Within the check interval the files are not looked at.
	clk.Add(500 * time.Millisecond)
	if got := s.Current().Cert.Leaf.SerialNumber; got.Cmp(first.Leaf.SerialNumber) != 0 {
		t.Fatalf("within the interval: serial %v, want the first still", got)
	}
	clk.Add(time.Second)
	if got := s.Current().Cert.Leaf.SerialNumber; got.Cmp(second.Leaf.SerialNumber) != 0 {
		t.Fatalf("after the rotation: serial %v, want the second", got)
	}
}

// TestReloadSymlinkSwap rotates as a Kubernetes Secret mount does: the
// files are symlinks through ..data, which is swapped to a new directory.
func TestReloadSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "ca")
	write := func(version string, p testcerts.Pair) {
		vdir := filepath.Join(dir, version)
		if err := os.Mkdir(vdir, 0o700); err != nil {
			t.Fatal(err)
		}
		testcerts.WritePair(t, vdir, "tls", p)
		testcerts.Write(t, vdir, "ca.crt", ca.PEM)
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(version, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	first, second := ca.Server(t), ca.Server(t)
	write("v1", first)
	for _, f := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := files(dir)
	cfg.CheckInterval = -1
	s, err := tlsconfig.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	write("v2", second)
	if got := s.Current().Cert.Leaf.SerialNumber; got.Cmp(second.Leaf.SerialNumber) != 0 {
		t.Fatalf("after the swap: serial %v, want the second", got)
	}
}

func TestBadFiles(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "ca")
	good := ca.Server(t)
	other := ca.Server(t)
	cert, key := testcerts.WritePair(t, dir, "good", good)
	_, otherKey := testcerts.WritePair(t, dir, "other", other)
	caFile := testcerts.Write(t, dir, "ca.crt", ca.PEM)
	junk := testcerts.Write(t, dir, "junk", []byte("not pem"))
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name           string
		cert, key, ca  string
		field, message string
	}{
		{"no cert", "", key, "", "TLSCertFile", "required with TLSKeyFile"},
		{"no key", cert, "", "", "TLSKeyFile", "required with TLSCertFile"},
		{"missing cert", missing, key, "", "TLSCertFile", "no such file"},
		{"missing key", cert, missing, "", "TLSKeyFile", "no such file"},
		{"missing ca", cert, key, missing, "TLSClientCAFile", "no such file"},
		{"junk cert", junk, key, "", "TLSCertFile", "no PEM CERTIFICATE"},
		{"junk key", cert, junk, "", "TLSKeyFile", "TLSCertFile"},
		{"key of another", cert, otherKey, "", "TLSKeyFile", "does not match"},
		{"junk ca", cert, key, junk, "TLSClientCAFile", "no PEM CERTIFICATE"},
		{"key as ca", cert, key, key, "TLSClientCAFile", "no PEM CERTIFICATE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tlsconfig.New(tlsconfig.Config{
				Cert: tlsconfig.File{Path: tc.cert, Field: "TLSCertFile"},
				Key:  tlsconfig.File{Path: tc.key, Field: "TLSKeyFile"},
				CA:   tlsconfig.File{Path: tc.ca, Field: "TLSClientCAFile"},
			})
			var fe *tlsconfig.FileError
			if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, tlsconfig.ErrInvalid) || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("New = %v, want a FileError for %s saying %q", err, tc.field, tc.message)
			}
		})
	}
	if _, err := tlsconfig.New(tlsconfig.Config{Cert: tlsconfig.File{Path: cert}, Key: tlsconfig.File{Path: key}, CA: tlsconfig.File{Path: caFile}}); err != nil {
		t.Fatalf("good files: %v", err)
	}
}

// TestServerConfigHandshake does real handshakes: a client with a
// certificate of the CA passes, one without or of another CA fails, and
// TLS 1.1 is refused.
func TestServerConfigHandshake(t *testing.T) {
	dir := t.TempDir()
	ca, other := testcerts.NewCA(t, "ca"), testcerts.NewCA(t, "other")
	testcerts.WritePair(t, dir, "tls", ca.Server(t))
	testcerts.Write(t, dir, "ca.crt", ca.PEM)
	s, err := tlsconfig.New(files(dir))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", tlsconfig.ServerConfig(s, tls.RequireAndVerifyClientCert, "h2"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_ = c.(*tls.Conn).Handshake() // then close: the client reads EOF, or the alert of a refusal
				c.Close()
			}()
		}
	}()
	dial := func(p *testcerts.Pair, maxVersion uint16) error {
		cfg := &tls.Config{ServerName: "localhost", RootCAs: s.Current().Pool, MaxVersion: maxVersion, NextProtos: []string{"h2"}}
		if p != nil {
			pair, err := tls.X509KeyPair(p.Cert, p.Key)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		if c.ConnectionState().NegotiatedProtocol != "h2" {
			t.Errorf("ALPN %q, want h2", c.ConnectionState().NegotiatedProtocol)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = c.Read(make([]byte, 1)) // a refused certificate is an alert here
		if err != nil && !strings.Contains(err.Error(), "EOF") {
			return err
		}
		return nil
	}
	good, bad := ca.Client(t, "good"), other.Client(t, "bad")
	if err := dial(&good, 0); err != nil {
		t.Fatalf("client of the CA: %v", err)
	}
	if err := dial(nil, 0); err == nil {
		t.Fatal("no client certificate: handshake passed")
	}
	if err := dial(&bad, 0); err == nil {
		t.Fatal("client of another CA: handshake passed")
	}
	if err := dial(&good, tls.VersionTLS11); err == nil {
		t.Fatal("TLS 1.1: handshake passed")
	}
}
