package clustersecret

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"fmt"
	"math/big"
	"time"
)

// The HKDF salt and the info labels of the derived keys.
const (
	salt       = "sluice cluster secret v1"
	gossipInfo = "gossip aes-256 key"
	peerInfo   = "peer ed25519 seed"
)

// PeerName is the DNS name in the derived peer certificates, and the
// server name peers dial each other under.
const PeerName = "sluice-peer"

// Material is what a set of secrets derives to. It is immutable.
type Material struct {
	// GossipKeys are the AES-256 gossip keys, the primary's first.
	GossipKeys [][]byte
	// Cert is the primary's peer certificate and key.
	Cert *tls.Certificate
	// Accepted are the peer public keys of every secret, the primary's
	// first.
	Accepted []ed25519.PublicKey
	// Fingerprints name the secrets in logs without revealing them: the
	// first 8 bytes of the SHA-256 of each public key, in hex.
	Fingerprints []string
}

// Derive derives the material of secrets, the primary first.
func Derive(secrets [][]byte) (*Material, error) {
	if len(secrets) == 0 {
		return nil, fmt.Errorf("%w: no secret", ErrBadFile)
	}
	m := &Material{}
	for i, s := range secrets {
		gk, err := hkdf.Key(sha256.New, s, []byte(salt), gossipInfo, 32)
		if err != nil {
			return nil, fmt.Errorf("clustersecret: derive the gossip key: %w", err)
		}
		seed, err := hkdf.Key(sha256.New, s, []byte(salt), peerInfo, ed25519.SeedSize)
		if err != nil {
			return nil, fmt.Errorf("clustersecret: derive the peer key: %w", err)
		}
		priv := ed25519.NewKeyFromSeed(seed)
		pub := priv.Public().(ed25519.PublicKey)
		m.GossipKeys = append(m.GossipKeys, gk)
		m.Accepted = append(m.Accepted, pub)
		m.Fingerprints = append(m.Fingerprints, fingerprint(pub))
		if i == 0 {
			if m.Cert, err = selfSigned(priv); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// accepts reports whether pub is the peer key of an accepted secret.
func (m *Material) accepts(pub ed25519.PublicKey) bool {
	for _, a := range m.Accepted {
		if bytes.Equal(a, pub) {
			return true
		}
	}
	return false
}

// fingerprint names a public key.
func fingerprint(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// selfSigned makes the peer certificate of priv. Peers check its public
// key, not its signature or dates, so it is valid from 2000 to 9999 and
// the same on every node (Ed25519 signs deterministically).
func selfSigned(priv ed25519.PrivateKey) (*tls.Certificate, error) {
	pub := priv.Public().(ed25519.PublicKey)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: PeerName + " " + fingerprint(pub)},
		DNSNames:              []string{PeerName},
		NotBefore:             time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		return nil, fmt.Errorf("clustersecret: peer certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("clustersecret: peer certificate: %w", err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: leaf}, nil
}
