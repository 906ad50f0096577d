package api

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// grpcHolder is the lease holder of a gRPC call: the identity of the
// client certificate its TLS connection verified (see certIdentity), or ""
// without one (plaintext, or TLS without client certificates).
func grpcHolder(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return ""
	}
	return tlsHolder(&info.State)
}

// tlsHolder is the identity of the verified client certificate of a TLS
// connection, or "" when none was verified.
func tlsHolder(cs *tls.ConnectionState) string {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return ""
	}
	return certIdentity(cs.VerifiedChains[0][0])
}

// certIdentity names the holder of a certificate by its Subject and its
// subject alternative names (DNS, URI, e-mail, IP), each list sorted and
// every value quoted, so that the form is unambiguous. Keys, serial number
// and validity are left out: a renewed certificate with the same names is
// the same holder (and, as with any name-based identity, so is another
// certificate the client CA issues with the same names).
func certIdentity(c *x509.Certificate) string {
	var b strings.Builder
	b.WriteString("subject ")
	b.WriteString(strconv.Quote(c.Subject.String()))
	list := func(kind string, vals []string) {
		vals = slices.Clone(vals)
		slices.Sort(vals)
		for _, v := range vals {
			b.WriteString(" " + kind + " ")
			b.WriteString(strconv.Quote(v))
		}
	}
	list("dns", c.DNSNames)
	uris := make([]string, len(c.URIs))
	for i, u := range c.URIs {
		uris[i] = u.String()
	}
	list("uri", uris)
	list("email", c.EmailAddresses)
	ips := make([]string, len(c.IPAddresses))
	for i, ip := range c.IPAddresses {
		ips[i] = ip.String()
	}
	list("ip", ips)
	return b.String()
}
