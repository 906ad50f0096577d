package xds_test

import (
	"errors"
	"strings"
	"testing"

	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sluice-rl/sluice/rls"
	"github.com/sluice-rl/sluice/rls/xds"
)

func anyOf(t testing.TB, c *rlsconf.RateLimitConfig) *anypb.Any {
	t.Helper()
	a, err := anypb.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// What the reference's converter carries over arrives: nested
// descriptors, values, names and replaces, unlimited, shadow mode.
func TestConvert(t *testing.T) {
	c, err := xds.Convert([]*anypb.Any{anyOf(t, &rlsconf.RateLimitConfig{Name: "r", Domain: "edge",
		Descriptors: []*rlsconf.RateLimitDescriptor{
			{Key: "ip", Value: "10.*", ShadowMode: true, RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_MINUTE, RequestsPerUnit: 7, Name: "a"}},
			{Key: "user", Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "path", Value: "a: b # c",
				RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_DAY, RequestsPerUnit: 1, Replaces: []*rlsconf.RateLimitReplace{{Name: "a"}}}}}},
			{Key: "free", RateLimit: &rlsconf.RateLimitPolicy{Unlimited: true}},
		}})}, rls.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !c.HasDomain("edge") || len(c.Files) != 1 || c.Files[0] != "xds:r" {
		t.Fatalf("domains %v, files %v", c.Domains(), c.Files)
	}
	for _, tc := range []struct {
		entries [][2]string
		want    string // the rule's FullKey, "" for none
		shadow  bool
	}{
		{[][2]string{{"ip", "10.0.0.1"}}, "edge.ip_10.*", true},
		{[][2]string{{"user", "u"}, {"path", "a: b # c"}}, "edge.user.path_a: b # c", false},
		{[][2]string{{"free", "x"}}, "edge.free", false},
		{[][2]string{{"ip", "11.0.0.1"}}, "", false},
	} {
		var es []rls.KV
		for _, e := range tc.entries {
			es = append(es, rls.KV{Key: e[0], Value: e[1]})
		}
		m, _ := rls.Lookup(c, "edge", es)
		switch {
		case tc.want == "" && m.Rule != nil:
			t.Errorf("%v matched %s", tc.entries, m.Rule.FullKey)
		case tc.want != "" && (m.Rule == nil || m.Rule.FullKey != tc.want || m.Rule.ShadowMode != tc.shadow):
			t.Errorf("%v matched %+v, want %s (shadow %v)", tc.entries, m.Rule, tc.want, tc.shadow)
		}
	}
	empty, err := xds.Convert(nil, rls.Options{})
	if err != nil || len(empty.Domains()) != 0 {
		t.Errorf("no resources: %v, %v", empty, err)
	}
}

// Each bad resource is an error naming the resource and the field.
func TestConvertBadInput(t *testing.T) {
	rl := func(u rlsconf.RateLimitUnit, unlimited bool) *rlsconf.RateLimitPolicy {
		return &rlsconf.RateLimitPolicy{Unit: u, RequestsPerUnit: 1, Unlimited: unlimited}
	}
	ok := &rlsconf.RateLimitConfig{Name: "ok", Domain: "d"}
	other, _ := anypb.New(structpb.NewStringValue("x"))
	for _, tc := range []struct {
		name string
		res  []*anypb.Any
		want []string
	}{
		{"another type", []*anypb.Any{other}, []string{"resources[0]", "type"}},
		{"undecodable", []*anypb.Any{{TypeUrl: xds.TypeURL, Value: []byte{0xff}}}, []string{"resources[0]"}},
		{"empty domain", []*anypb.Any{anyOf(t, &rlsconf.RateLimitConfig{Name: "n"})}, []string{"xds:n", "domain"}},
		{"duplicate domain", []*anypb.Any{anyOf(t, ok), anyOf(t, ok)}, []string{"xds:ok", "duplicate domain 'd'"}},
		{"empty key", []*anypb.Any{anyOf(t, &rlsconf.RateLimitConfig{Name: "n", Domain: "d",
			Descriptors: []*rlsconf.RateLimitDescriptor{{}}})}, []string{"descriptors[0].key"}},
		{"no unit", []*anypb.Any{anyOf(t, &rlsconf.RateLimitConfig{Name: "n", Domain: "d",
			Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "k", RateLimit: rl(rlsconf.RateLimitUnit_UNKNOWN, false)}}})},
			[]string{"descriptors[0].rate_limit.unit", "invalid rate limit unit 'UNKNOWN'"}},
		{"unknown unit number", []*anypb.Any{anyOf(t, &rlsconf.RateLimitConfig{Name: "n", Domain: "d",
			Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "k", RateLimit: rl(9, false)}}})},
			[]string{"descriptors[0].rate_limit.unit", "'9'"}},
		{"unlimited with unit", []*anypb.Any{anyOf(t, &rlsconf.RateLimitConfig{Name: "n", Domain: "d",
			Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "k", RateLimit: rl(rlsconf.RateLimitUnit_SECOND, true)}}})},
			[]string{"rate_limit.unit", "should not specify rate limit unit when unlimited"}},
		{"duplicate descriptor", []*anypb.Any{anyOf(t, &rlsconf.RateLimitConfig{Name: "n", Domain: "d",
			Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "k"}, {Key: "k"}}})}, []string{"duplicate descriptor composite key 'd.k'"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := xds.Convert(tc.res, rls.Options{})
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, xds.ErrInvalidResource) && !errors.Is(err, rls.ErrInvalidConfig) {
				t.Errorf("err %v wraps neither sentinel", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err %q does not contain %q", err, w)
				}
			}
		})
	}
}

// Whatever bytes a server sends as a RateLimitConfig, Convert returns a
// config or an error, never panics.
func FuzzConvert(f *testing.F) {
	for _, c := range []*rlsconf.RateLimitConfig{
		{Name: "n", Domain: "d", Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "k", Value: "v*",
			RateLimit:   &rlsconf.RateLimitPolicy{Unit: 1, RequestsPerUnit: 3, Name: "x", Replaces: []*rlsconf.RateLimitReplace{{Name: "y"}}},
			Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "k2"}}}}},
		{Domain: "d"},
	} {
		a, err := anypb.New(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(a.Value)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := xds.Convert([]*anypb.Any{{TypeUrl: xds.TypeURL, Value: b}}, rls.Options{})
		if (c == nil) == (err == nil) {
			t.Fatalf("config %v and error %v", c, err)
		}
	})
}
