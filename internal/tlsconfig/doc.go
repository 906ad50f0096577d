// Package tlsconfig builds the TLS configurations of Sluice's listeners
// and dialers from PEM files, and re-reads the files when they change.
//
// A Source holds a certificate and key (and optionally a CA bundle) loaded
// from files. At a TLS handshake, at most once per Config.CheckInterval, it
// stats the files (following symlinks, so that a Kubernetes Secret mount,
// which swaps a ..data symlink, and cert-manager, which rewrites the files,
// are both seen) and reloads them when a modification time, size or file identity
// changed. A reload that fails (a half-written pair whose key does not match
// its certificate) keeps the material in force and is retried at the next
// check, so a rotation never breaks a handshake and needs no restart;
// established connections keep their session.
//
// ServerConfig and ClientCredentials give the *tls.Config of a listener
// and the gRPC credentials of a dialer over a Source. PeerAuth is the gRPC
// interceptor pair that admits only peers (see PeerAuth for the rule).
package tlsconfig
