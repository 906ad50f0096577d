package clustersecret

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// source writes lines to a file in dir and loads it.
func source(t *testing.T, dir, name string, lines ...string) (*Source, string) {
	t.Helper()
	path := filepath.Join(dir, name)
	write(t, path, lines...)
	s, err := NewSource(path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, path
}

func write(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// handshake dials a TLS server of srv on loopback with the client
// credentials of cli, and returns both sides' errors.
func handshake(t *testing.T, srv, cli *Source) (serverErr, clientErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		tc := tls.Server(c, srv.ServerConfig())
		err = tc.Handshake()
		if err == nil {
			// An echo of one byte: the client sees it only if admitted.
			b := make([]byte, 1)
			if _, err = tc.Read(b); err == nil {
				_, err = tc.Write(b)
			}
		}
		done <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	conn, _, clientErr := cli.ClientCredentials().ClientHandshake(ctx, "ignored:1", raw)
	if clientErr == nil {
		// TLS 1.3: the server checks the client's certificate after the
		// client's handshake returns; its refusal arrives as an alert.
		if _, clientErr = conn.Write([]byte{1}); clientErr == nil {
			_, clientErr = conn.Read(make([]byte, 1))
		}
	}
	return <-done, clientErr
}

func TestPeerTLSAdmitsOnlyTheSecret(t *testing.T) {
	dir := t.TempDir()
	a1, _ := source(t, dir, "a1", secret(1, 32))
	a2, _ := source(t, dir, "a2", secret(1, 32))
	b, _ := source(t, dir, "b", secret(2, 32))
	if se, ce := handshake(t, a1, a2); se != nil || ce != nil {
		t.Fatalf("same secret: server %v, client %v; want both admitted", se, ce)
	}
	if se, ce := handshake(t, a1, b); se == nil || ce == nil {
		t.Fatalf("other secret dialing: server %v, client %v; want both refused", se, ce)
	} else if !strings.Contains(ce.Error(), "bad certificate") && !errors.Is(ce, ErrNotPeer) {
		t.Fatalf("client error %v, want a refusal", ce)
	}
}

// A rotation in three steps keeps every pair of nodes talking, whichever
// step each is at.
func TestPeerTLSRotation(t *testing.T) {
	dir := t.TempDir()
	old, next := secret(1, 32), secret(2, 32)
	steps := [][]string{{old}, {old, next}, {next, old}, {next}}
	var srcs []*Source
	for i, lines := range steps {
		s, _ := source(t, dir, "step"+string(rune('0'+i)), lines...)
		srcs = append(srcs, s)
	}
	for i := range srcs {
		for j := range srcs {
			if i-j > 1 || j-i > 1 {
				continue // never at once: each step waits for every node to finish the one before
			}
			if _, ce := handshake(t, srcs[i], srcs[j]); ce != nil {
				t.Errorf("server at step %d, client at step %d: %v", i, j, ce)
			}
		}
	}
	if _, ce := handshake(t, srcs[0], srcs[3]); ce == nil {
		t.Errorf("server with only the old secret admitted a client with only the new one")
	}
}

func TestSourceReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secret")
	write(t, path, secret(1, 32))
	var got []*Material
	s, err := NewSource(path, func(m *Material) { got = append(got, m) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := s.Status()
	if err := s.Reload(); err != nil || s.Status().Reloads != 0 || len(got) != 0 {
		t.Fatalf("unchanged file: %v, %+v, %d changes", err, s.Status(), len(got))
	}
	write(t, path, "garbage")
	if err := s.Reload(); !errors.Is(err, ErrBadFile) || s.Status().Rejected != 1 || s.Status().Primary != first.Primary {
		t.Fatalf("bad file: %v, %+v; want rejected, the secret kept", err, s.Status())
	}
	write(t, path, secret(2, 32), secret(1, 32))
	if err := s.Reload(); err != nil || len(got) != 1 {
		t.Fatalf("rotated file: %v, %d changes", err, len(got))
	}
	st := s.Status()
	if st.Reloads != 1 || st.Primary == first.Primary || len(st.Accepted) != 2 || st.Accepted[1] != first.Primary {
		t.Fatalf("after the rotation: %+v", st)
	}
	if !bytes.Equal(got[0].GossipKeys[1], mustDerive(t, secret(1, 32)).GossipKeys[0]) {
		t.Fatal("the old secret's gossip key is not the second")
	}
}

func mustDerive(t *testing.T, b64 string) *Material {
	t.Helper()
	s, err := Parse("f", []byte(b64))
	if err != nil {
		t.Fatal(err)
	}
	m, err := Derive(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The derived keys are distinct per use and per secret, and the same on
// every node.
func TestDeriveDistinct(t *testing.T) {
	a, a2, b := mustDerive(t, secret(1, 32)), mustDerive(t, secret(1, 32)), mustDerive(t, secret(2, 32))
	if !bytes.Equal(a.GossipKeys[0], a2.GossipKeys[0]) || !bytes.Equal(a.Accepted[0], a2.Accepted[0]) {
		t.Fatal("one secret derives different keys")
	}
	if bytes.Equal(a.GossipKeys[0], b.GossipKeys[0]) || bytes.Equal(a.Accepted[0], b.Accepted[0]) {
		t.Fatal("two secrets derive one key")
	}
	if bytes.Equal(a.GossipKeys[0], a.Accepted[0]) || len(a.GossipKeys[0]) != 32 {
		t.Fatal("the gossip key is not a distinct AES-256 key")
	}
}
