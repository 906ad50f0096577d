package middleware

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"google.golang.org/grpc/metadata"
)

// ClientIPConfig says which addresses of a request's forwarding headers to
// believe.
type ClientIPConfig struct {
	// TrustedProxies are the proxies in front of the server, as CIDRs
	// ("10.0.0.0/8", "2001:db8::/32") or single addresses ("192.0.2.7").
	// The forwarding header is honoured only when the immediate peer is
	// one of them. Empty: the header is never read and the client is the
	// immediate peer.
	TrustedProxies []string
	// Header is the forwarding header the trusted proxies write:
	// "X-Forwarded-For" (when empty) or "Forwarded" (RFC 7239, its for=
	// parameters). Only one is read: a proxy that writes one passes the
	// other through as the client sent it, so reading both would let a
	// client choose its own key.
	Header string
	// MaxBytes bounds the bytes of the header read, from its right end;
	// 0 means 1024.
	MaxBytes int
	// MaxHops bounds the trusted proxies walked past in the header; 0
	// means 16.
	MaxHops int
}

// clientIP finds a request's client address (see ClientIP).
type clientIP struct {
	trusted   []netip.Prefix
	forwarded bool // the header is Forwarded, not X-Forwarded-For
	header    string
	maxBytes  int
	maxHops   int
}

// ClientIP returns a key function whose key is the client's IP address.
//
// The client is the immediate peer (the request's RemoteAddr), unless that
// peer is a trusted proxy: then the forwarding header is walked from its
// right end (the entry the nearest proxy added) leftwards past trusted
// proxies, and the client is the first address that is not one, the
// right-most untrusted address, which no client can forge. When every
// address in the header is trusted, the client is the left-most of them.
// When the entry where the client should be is not an address (garbage,
// "unknown", an obfuscated identifier), or the walk passes more than
// MaxHops proxies or MaxBytes of header, the client is unknown and the
// key is the immediate peer's address: requests with such headers share
// their proxy's limit rather than escape it.
//
// Addresses are written in their canonical form, IPv4 in IPv6
// (::ffff:192.0.2.1) as IPv4, without port or zone. A RemoteAddr that is
// not an address (a Unix socket) is the key as it is; an empty one gives
// no key.
//
// It fails on a TrustedProxies entry that is not an address or CIDR, a
// Header other than the two, or a negative bound; errors wrap ErrConfig.
func ClientIP(cfg ClientIPConfig) (HTTPKeyFunc, error) {
	c, err := newClientIP(cfg)
	if err != nil {
		return nil, err
	}
	return c.key, nil
}

// GRPCClientIP is ClientIP for gRPC calls: the immediate peer is the call's
// peer (as PeerIP reads it), and the forwarding header is the incoming
// metadata of the same name in lower case, x-forwarded-for or forwarded,
// which proxies such as Envoy set on gRPC requests too.
func GRPCClientIP(cfg ClientIPConfig) (GRPCKeyFunc, error) {
	c, err := newClientIP(cfg)
	if err != nil {
		return nil, err
	}
	name := strings.ToLower(c.header)
	peerKey := PeerIP()
	return func(ctx context.Context, method string) (string, bool) {
		key, ok := peerKey(ctx, method)
		peer, perr := netip.ParseAddr(key)
		if !ok || perr != nil || !c.isTrusted(peer) {
			return key, ok
		}
		if a, ok := c.fromHeader(metadata.ValueFromIncomingContext(ctx, name)); ok {
			return a.String(), true
		}
		return key, true
	}, nil
}

// newClientIP checks cfg and applies its defaults.
func newClientIP(cfg ClientIPConfig) (*clientIP, error) {
	c := &clientIP{maxBytes: cfg.MaxBytes, maxHops: cfg.MaxHops}
	for i, s := range cfg.TrustedProxies {
		p, err := parsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%w: TrustedProxies[%d]: %q is not an address or CIDR", ErrConfig, i, s)
		}
		c.trusted = append(c.trusted, p)
	}
	switch http.CanonicalHeaderKey(cfg.Header) {
	case "", "X-Forwarded-For":
		c.header = "X-Forwarded-For"
	case "Forwarded":
		c.header, c.forwarded = "Forwarded", true
	default:
		return nil, fmt.Errorf("%w: Header: %q: must be X-Forwarded-For or Forwarded", ErrConfig, cfg.Header)
	}
	if c.maxBytes < 0 || c.maxHops < 0 {
		return nil, fmt.Errorf("%w: MaxBytes and MaxHops must not be negative", ErrConfig)
	}
	if c.maxBytes == 0 {
		c.maxBytes = 1024
	}
	if c.maxHops == 0 {
		c.maxHops = 16
	}
	return c, nil
}

// parsePrefix parses a CIDR or a single address (a /32 or /128), IPv4 in
// IPv6 as IPv4.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.WithZone("").Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func (c *clientIP) isTrusted(a netip.Addr) bool {
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func (c *clientIP) key(r *http.Request) (string, bool) {
	peer, ok := parseHostPort(r.RemoteAddr)
	if !ok {
		return r.RemoteAddr, r.RemoteAddr != ""
	}
	if !c.isTrusted(peer) {
		return peer.String(), true
	}
	if a, ok := c.fromHeader(r.Header.Values(c.header)); ok {
		return a.String(), true
	}
	return peer.String(), true
}

// fromHeader walks the header's entries from the right; ok is false when
// the client is unknown.
func (c *clientIP) fromHeader(lines []string) (client netip.Addr, ok bool) {
	budget, hops := c.maxBytes, 0
	var last netip.Addr // the left-most trusted address so far
	for i := len(lines) - 1; i >= 0; i-- {
		line := lines[i]
		for line != "" {
			var elem string
			if j := strings.LastIndexByte(line, ','); j >= 0 {
				elem, line = line[j+1:], line[:j]
			} else {
				elem, line = line, ""
			}
			if budget -= len(elem) + 1; budget < 0 {
				return netip.Addr{}, false
			}
			elem = strings.Trim(elem, " \t")
			if elem == "" {
				continue // "a,,b": an empty list member, not an entry
			}
			var a netip.Addr
			if c.forwarded {
				a, ok = forwardedFor(elem)
			} else {
				a, ok = parseNode(elem)
			}
			if !ok {
				return netip.Addr{}, false
			}
			if !c.isTrusted(a) {
				return a, true
			}
			if hops++; hops > c.maxHops {
				return netip.Addr{}, false
			}
			last = a
		}
	}
	return last, last.IsValid()
}

// forwardedFor is the address of an RFC 7239 forwarded-element's for=
// parameter: for=192.0.2.60, for="[2001:db8::17]:4711".
func forwardedFor(elem string) (netip.Addr, bool) {
	for elem != "" {
		var pair string
		pair, elem, _ = strings.Cut(elem, ";")
		name, value, found := strings.Cut(strings.Trim(pair, " \t"), "=")
		if !found || !strings.EqualFold(name, "for") {
			continue
		}
		if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
			value = value[1 : len(value)-1]
		}
		return parseNode(value)
	}
	return netip.Addr{}, false
}

// parseNode parses an address with an optional port and brackets:
// 192.0.2.1, 192.0.2.1:80, 2001:db8::1, [2001:db8::1], [2001:db8::1]:80.
func parseNode(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.WithZone("").Unmap(), true
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil && a.Is6() {
			return a.WithZone("").Unmap(), true
		}
		return netip.Addr{}, false
	}
	return parseHostPort(s)
}

// parseHostPort parses host:port whose host is an address.
func parseHostPort(s string) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(s)
	if err != nil {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}
