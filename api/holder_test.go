package api

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/sluice-rl/sluice/internal/testcerts"
)

// A client's lease holder is its certificate's names: a renewed
// certificate (new key, serial and validity) with the same names is the
// same holder, SANs in another order too; other names are another holder,
// and no quoting trick makes two name sets collide.
func TestCertIdentity(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	a1 := ca.Issue(t, testcerts.Options{CommonName: "svc-a", Client: true, DNSNames: []string{"x.example", "y.example"}})
	a2 := ca.Issue(t, testcerts.Options{CommonName: "svc-a", Client: true, DNSNames: []string{"y.example", "x.example"}})
	if got, want := certIdentity(a2.Leaf), certIdentity(a1.Leaf); got != want {
		t.Fatalf("renewed certificate: %q, want %q", got, want)
	}
	others := []testcerts.Pair{
		ca.Issue(t, testcerts.Options{CommonName: "svc-b", Client: true, DNSNames: []string{"x.example", "y.example"}}),
		ca.Issue(t, testcerts.Options{CommonName: "svc-a", Client: true, DNSNames: []string{"x.example"}}),
		ca.Issue(t, testcerts.Options{CommonName: `svc-a" dns "x.example`, Client: true, DNSNames: []string{"y.example"}}),
	}
	seen := map[string]bool{certIdentity(a1.Leaf): true}
	for _, o := range others {
		id := certIdentity(o.Leaf)
		if seen[id] {
			t.Fatalf("%v and another certificate share the identity %q", o.Leaf.Subject, id)
		}
		seen[id] = true
	}
	// Only a verified chain names a holder.
	if h := tlsHolder(&tls.ConnectionState{PeerCertificates: []*x509.Certificate{a1.Leaf}}); h != "" {
		t.Fatalf("an unverified certificate named holder %q", h)
	}
	if h := tlsHolder(&tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{a1.Leaf, ca.Cert}}}); h != certIdentity(a1.Leaf) {
		t.Fatalf("verified chain: holder %q", h)
	}
	if h := tlsHolder(nil); h != "" {
		t.Fatalf("no TLS: holder %q", h)
	}
}
