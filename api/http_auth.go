package api

import (
	"net/http"
)

// Client certificates on the HTTP API (HTTPConfig.RequireClientCert).
//
// A TLS listener that requires a client certificate at the handshake
// refuses the kubelet's probes, which cannot present one. So with mTLS the
// listener asks for a certificate and verifies it if given
// (tls.VerifyClientCertIfGiven: an untrusted certificate still fails the
// handshake), and this check admits a request without one only to the
// probes. They reveal nothing but "ok" and whether the node is ready;
// checks, usage and /metrics (the keys' traffic, the members) stay behind
// the certificate, as they are on the gRPC port.

// errNoClientCert is the answer to a request that needs a client
// certificate and came without one.
var errNoClientCert = &httpError{status: http.StatusUnauthorized,
	msg: "a client certificate is required (mTLS): only /healthz and /readyz answer without one"}

// isProbe reports whether path is one of the probes, which answer without
// a client certificate.
func isProbe(path string) bool {
	return path == "/healthz" || path == "/readyz"
}

// hasVerifiedClientCert reports whether r came over TLS with a client
// certificate that the handshake verified against the client CA bundle.
func hasVerifiedClientCert(r *http.Request) bool {
	return r.TLS != nil && len(r.TLS.PeerCertificates) > 0 && len(r.TLS.VerifiedChains) > 0
}
