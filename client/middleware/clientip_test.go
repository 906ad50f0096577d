package middleware_test

import (
	"errors"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/client/middleware"
)

func TestClientIP(t *testing.T) {
	trusted := []string{"10.0.0.0/8", "::1", "2001:db8:ffff::/48"}
	many := strings.TrimSuffix(strings.Repeat("10.0.0.3, ", 16), ", ")
	for _, tc := range []struct {
		name    string
		cfg     middleware.ClientIPConfig // TrustedProxies default to trusted
		remote  string
		xff     []string
		fwd     []string
		want    string
		wantNot bool // no key
	}{
		{name: "untrusted peer: its headers are ignored", remote: "198.51.100.7:999", xff: []string{"203.0.113.9"}, want: "198.51.100.7"},
		{name: "trusted peer, one hop", remote: "10.0.0.1:1", xff: []string{"203.0.113.9"}, want: "203.0.113.9"},
		{name: "right-most untrusted: forged entries on the left are not read", remote: "10.0.0.1:1",
			xff: []string{"1.1.1.1, 203.0.113.9, 10.0.0.2"}, want: "203.0.113.9"},
		{name: "several header lines are one list", remote: "10.0.0.1:1", xff: []string{"1.1.1.1", "203.0.113.9, 10.0.0.2"}, want: "203.0.113.9"},
		{name: "no header: the trusted peer", remote: "10.0.0.1:1", want: "10.0.0.1"},
		{name: "every hop trusted: the left-most", remote: "10.0.0.1:1", xff: []string{"10.0.0.7, 10.0.0.2"}, want: "10.0.0.7"},
		{name: "garbage where the client is: the peer", remote: "10.0.0.1:1", xff: []string{"203.0.113.9, not-an-ip"}, want: "10.0.0.1"},
		{name: "garbage left of the client is not read", remote: "10.0.0.1:1", xff: []string{"\x00garbage;;, 203.0.113.9"}, want: "203.0.113.9"},
		{name: "empty members are skipped", remote: "10.0.0.1:1", xff: []string{" 203.0.113.9 ,, \t,"}, want: "203.0.113.9"},
		{name: "a port on an entry", remote: "10.0.0.1:1", xff: []string{"203.0.113.9:4711"}, want: "203.0.113.9"},
		{name: "IPv6 entry", remote: "10.0.0.1:1", xff: []string{"2001:DB8::1"}, want: "2001:db8::1"},
		{name: "IPv6 entry with brackets and port", remote: "10.0.0.1:1", xff: []string{"[2001:db8::1]:443"}, want: "2001:db8::1"},
		{name: "IPv6 entry in brackets", remote: "10.0.0.1:1", xff: []string{"[2001:db8::1]"}, want: "2001:db8::1"},
		{name: "IPv4 in brackets is garbage", remote: "10.0.0.1:1", xff: []string{"[203.0.113.9]"}, want: "10.0.0.1"},
		{name: "IPv4-mapped IPv6 is IPv4", remote: "10.0.0.1:1", xff: []string{"::ffff:203.0.113.9"}, want: "203.0.113.9"},
		{name: "IPv6 trusted peer", remote: "[::1]:8080", xff: []string{"203.0.113.9"}, want: "203.0.113.9"},
		{name: "IPv6 trusted hop", remote: "[::1]:8080", xff: []string{"2001:db8::5, 2001:db8:ffff::2"}, want: "2001:db8::5"},
		{name: "zone dropped", remote: "[fe80::1%eth0]:80", want: "fe80::1"},
		{name: "IPv4-mapped peer", remote: "[::ffff:10.0.0.1]:80", xff: []string{"203.0.113.9"}, want: "203.0.113.9"},
		{name: "16 trusted hops then the client", remote: "10.0.0.1:1", xff: []string{"203.0.113.9, " + many}, want: "203.0.113.9"},
		{name: "17 trusted hops: too many, the peer", remote: "10.0.0.1:1", xff: []string{"203.0.113.9, 10.0.0.4, " + many}, want: "10.0.0.1"},
		{name: "MaxHops 1", cfg: middleware.ClientIPConfig{MaxHops: 1}, remote: "10.0.0.1:1",
			xff: []string{"203.0.113.9, 10.0.0.2, 10.0.0.3"}, want: "10.0.0.1"},
		{name: "a long header is read only from its right end", remote: "10.0.0.1:1",
			xff: []string{strings.Repeat("x", 1<<20) + ", 203.0.113.9"}, want: "203.0.113.9"},
		{name: "client beyond MaxBytes: the peer", cfg: middleware.ClientIPConfig{MaxBytes: 20}, remote: "10.0.0.1:1",
			xff: []string{"203.0.113.9, 10.0.0.2, 10.0.0.3"}, want: "10.0.0.1"},
		{name: "an entry longer than MaxBytes: the peer", remote: "10.0.0.1:1", xff: []string{strings.Repeat("1", 2000)}, want: "10.0.0.1"},
		{name: "X-Forwarded-For mode ignores Forwarded", remote: "10.0.0.1:1", fwd: []string{"for=203.0.113.9"}, want: "10.0.0.1"},
		{name: "Forwarded", cfg: middleware.ClientIPConfig{Header: "forwarded"}, remote: "10.0.0.1:1",
			fwd: []string{`for=198.51.100.1, for=192.0.2.60;proto=http;by=203.0.113.43, FOR="[2001:db8:cafe::17]:4711";proto=https`},
			xff: []string{"203.0.113.200"}, want: "2001:db8:cafe::17"},
		{name: "Forwarded past a trusted hop", cfg: middleware.ClientIPConfig{Header: "Forwarded"}, remote: "10.0.0.1:1",
			fwd: []string{`for=192.0.2.60;proto=http, for=10.0.0.9`}, want: "192.0.2.60"},
		{name: "Forwarded unknown: the peer", cfg: middleware.ClientIPConfig{Header: "Forwarded"}, remote: "10.0.0.1:1",
			fwd: []string{"for=unknown"}, want: "10.0.0.1"},
		{name: "Forwarded obfuscated: the peer", cfg: middleware.ClientIPConfig{Header: "Forwarded"}, remote: "10.0.0.1:1",
			fwd: []string{`for="_hidden"`}, want: "10.0.0.1"},
		{name: "Forwarded without for: the peer", cfg: middleware.ClientIPConfig{Header: "Forwarded"}, remote: "10.0.0.1:1",
			fwd: []string{"proto=https;by=10.0.0.1"}, want: "10.0.0.1"},
		{name: "Forwarded unterminated quote: the peer", cfg: middleware.ClientIPConfig{Header: "Forwarded"}, remote: "10.0.0.1:1",
			fwd: []string{`for="203.0.113.9`}, want: "10.0.0.1"},
		{name: "no trusted proxies: always the peer", cfg: middleware.ClientIPConfig{TrustedProxies: []string{}}, remote: "10.0.0.1:1",
			xff: []string{"203.0.113.9"}, want: "10.0.0.1"},
		{name: "a Unix socket peer as it is", remote: "@", want: "@"},
		{name: "no peer: no key", remote: "", wantNot: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			if cfg.TrustedProxies == nil {
				cfg.TrustedProxies = trusted
			}
			f, err := middleware.ClientIP(cfg)
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.remote
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			for _, v := range tc.fwd {
				r.Header.Add("Forwarded", v)
			}
			got, ok := f(r)
			if ok == tc.wantNot || got != tc.want {
				t.Errorf("key %q, %v; want %q, %v", got, ok, tc.want, !tc.wantNot)
			}
		})
	}
}

func TestClientIPConfigErrors(t *testing.T) {
	for _, cfg := range []middleware.ClientIPConfig{
		{TrustedProxies: []string{"10.0.0.0/33"}},
		{TrustedProxies: []string{"10.0.0.0/8", "proxy.internal"}},
		{TrustedProxies: []string{""}},
		{Header: "X-Real-IP"},
		{MaxBytes: -1},
		{MaxHops: -1},
	} {
		if f, err := middleware.ClientIP(cfg); !errors.Is(err, middleware.ErrConfig) || f != nil {
			t.Errorf("%+v: ClientIP = %v; want an ErrConfig", cfg, err)
		}
	}
}

// IPv4 in IPv6 CIDRs trust the IPv4 addresses they hold.
func TestClientIPMappedCIDR(t *testing.T) {
	f, err := middleware.ClientIP(middleware.ClientIPConfig{TrustedProxies: []string{"::ffff:10.0.0.0/104"}})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.1.2.3:4"
	r.Header.Set("X-Forwarded-For", "203.0.113.9")
	if got, _ := f(r); got != "203.0.113.9" {
		t.Fatalf("key %q, want 203.0.113.9", got)
	}
}

// FuzzClientIP: whatever the headers, the key is an address in canonical
// form, and it is the peer or an address the header holds.
func FuzzClientIP(f *testing.F) {
	f.Add("203.0.113.9, 10.0.0.2", `for="[2001:db8::1]:80"`)
	f.Add("[::1]:80,,garbage", "for=unknown;by=x, for=10.0.0.1")
	f.Add(strings.Repeat("10.0.0.1,", 40), `for="`)
	xffKey, err := middleware.ClientIP(middleware.ClientIPConfig{TrustedProxies: []string{"10.0.0.0/8", "::1"}, MaxBytes: 256})
	if err != nil {
		f.Fatal(err)
	}
	fwdKey, err := middleware.ClientIP(middleware.ClientIPConfig{TrustedProxies: []string{"10.0.0.0/8", "::1"}, Header: "Forwarded"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, xff, fwd string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "10.0.0.1:1"
		r.Header.Set("X-Forwarded-For", xff)
		r.Header.Set("Forwarded", fwd)
		for _, tc := range []struct {
			key    middleware.HTTPKeyFunc
			header string
		}{{xffKey, xff}, {fwdKey, fwd}} {
			got, ok := tc.key(r)
			a, err := netip.ParseAddr(got)
			if !ok || err != nil || a.String() != got || a.Zone() != "" || a.Is4In6() {
				t.Fatalf("key %q, %v: not a canonical address", got, ok)
			}
			if got != "10.0.0.1" && !strings.Contains(strings.ToLower(tc.header), got) && !a.Is6() {
				t.Fatalf("key %q is neither the peer nor in the header %q", got, tc.header)
			}
		}
	})
}
