package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/node"
)

// node.New's errors name Config fields; `sluice serve` names the flags.
func TestNameFlags(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"TLSKeyFile: required with TLSCertFile", "--tls-key-file: required with --tls-cert-file"},
		{"tlsconfig: invalid: TLSCertFile (the default of PeerTLSCertFile) (/x): no such file",
			"tlsconfig: invalid: --tls-cert-file (the default of --peer-tls-cert-file) (/x): no such file"},
		{`PeerTLSCertFile: certificate "CN=x" has no DNS SAN "sluice-peer" (PeerTLSName)`,
			`--peer-tls-cert-file: certificate "CN=x" has no DNS SAN "sluice-peer" (--peer-tls-name)`},
		{"Bounds.HTTPReadTimeout: must be >= 0", "--http-read-timeout: must be >= 0"},
		{"cluster: invalid config: Join[1]: bad", "cluster: invalid config: --join[1]: bad"},
		{"PolicyFile: x; RLSConfig: y", "--config: x; --rls-config: y"},
		// Words that merely contain a field's name are left alone.
		{"mTLS is TLS with client certificates; MyTLSCertFileX", "mTLS is TLS with client certificates; MyTLSCertFileX"},
	} {
		err := nameFlags(fmt.Errorf("%w: %s", node.ErrInvalidConfig, tc.in))
		if want := node.ErrInvalidConfig.Error() + ": " + tc.want; err.Error() != want {
			t.Errorf("nameFlags(%q) = %q, want %q", tc.in, err, want)
		}
		if !errors.Is(err, node.ErrInvalidConfig) {
			t.Errorf("nameFlags(%q) lost ErrInvalidConfig", tc.in)
		}
	}
	if nameFlags(nil) != nil {
		t.Error("nameFlags(nil) != nil")
	}
}

// Every flag serveFlags names is a flag of `sluice serve`.
func TestServeFlagsExist(t *testing.T) {
	var help bytes.Buffer
	_ = runServe(context.Background(), []string{"-h"}, &help, &help)
	for field, flag := range serveFlags {
		if !strings.Contains(help.String(), "  -"+flag+" ") && !strings.Contains(help.String(), "  -"+flag+"\n") {
			t.Errorf("%s maps to --%s, which `sluice serve -h` does not list", field, flag)
		}
	}
}
