package main

import (
	"flag"
	"fmt"

	"github.com/sluice-rl/sluice/rls/xds"
)

// The reference's CONFIG_TYPE values.
const (
	configTypeFile = "FILE"
	configTypeXDS  = "GRPC_XDS_SOTW"
)

// rlsXDSFlags are the flags of the RLS configuration over xDS; their
// environment twins are envoyproxy/ratelimit's variables (referenceEnv).
type rlsXDSFlags struct {
	configType configTypeFlag
	s          xds.Settings
}

// configTypeFlag is CONFIG_TYPE: FILE or GRPC_XDS_SOTW.
type configTypeFlag struct{ v *string }

func (f configTypeFlag) String() string {
	if f.v == nil {
		return configTypeFile
	}
	return *f.v
}

func (f configTypeFlag) Set(v string) error {
	if v != configTypeFile && v != configTypeXDS {
		return fmt.Errorf("%q is not %s or %s", v, configTypeFile, configTypeXDS)
	}
	*f.v = v
	return nil
}

// pairsFlag is a "k<sep>v,..." list, checked when set.
type pairsFlag struct {
	v   *string
	sep byte
}

func (f pairsFlag) String() string {
	if f.v == nil {
		return ""
	}
	return *f.v
}

func (f pairsFlag) Set(v string) error {
	if _, err := xds.ParsePairs(v, f.sep); err != nil {
		return err
	}
	*f.v = v
	return nil
}

func (r *rlsXDSFlags) register(fs *flag.FlagSet) {
	r.s = xds.DefaultSettings()
	ct := configTypeFile
	r.configType = configTypeFlag{&ct}
	s := &r.s
	fs.Var(r.configType, "rls-config-type", "where the Envoy rate limit service's configuration comes from: FILE (--rls-config) or GRPC_XDS_SOTW (over xDS from --rls-xds-server, as envoyproxy/ratelimit; Envoy Gateway's rate limit deployment sets it)")
	fs.StringVar(&s.ServerURL, "rls-xds-server", s.ServerURL, "with --rls-config-type GRPC_XDS_SOTW: the xDS management server's gRPC address")
	fs.StringVar(&s.NodeID, "rls-xds-node-id", s.NodeID, "with GRPC_XDS_SOTW: the xDS node id the server keys its snapshots by")
	fs.Var(pairsFlag{&s.NodeMetadata, '='}, "rls-xds-node-metadata", "with GRPC_XDS_SOTW: the xDS node's metadata, key=value pairs separated by commas")
	fs.Var(pairsFlag{&s.Headers, ':'}, "rls-xds-headers", "with GRPC_XDS_SOTW: gRPC metadata sent to the xDS server, key:value pairs separated by commas")
	fs.DurationVar(&s.ConnectRetryInterval, "rls-xds-connect-retry-interval", s.ConnectRetryInterval, "with GRPC_XDS_SOTW: base delay between connection attempts to the xDS server")
	fs.BoolVar(&s.UseTLS, "rls-xds-tls", false, "with GRPC_XDS_SOTW: dial the xDS server with TLS")
	fs.StringVar(&s.TLSCertFile, "rls-xds-tls-cert-file", "", "with --rls-xds-tls: PEM client certificate presented to the xDS server")
	fs.StringVar(&s.TLSKeyFile, "rls-xds-tls-key-file", "", "with --rls-xds-tls: PEM key of --rls-xds-tls-cert-file")
	fs.StringVar(&s.TLSCAFile, "rls-xds-tls-ca-file", "", "with --rls-xds-tls: PEM CA bundle that verifies the xDS server (default: the system's roots)")
	fs.StringVar(&s.TLSServerName, "rls-xds-tls-server-name", "", "with --rls-xds-tls: the name the xDS server's certificate must carry (default: the host of --rls-xds-server)")
	fs.DurationVar(&s.BackoffInitial, "rls-xds-backoff-initial", s.BackoffInitial, "with GRPC_XDS_SOTW: first wait before a broken xDS stream is opened again; it doubles up to --rls-xds-backoff-max")
	fs.DurationVar(&s.BackoffMax, "rls-xds-backoff-max", s.BackoffMax, "with GRPC_XDS_SOTW: longest wait before a broken xDS stream is opened again")
	fs.IntVar(&s.MaxRecvBytes, "rls-xds-max-recv-bytes", 0, "with GRPC_XDS_SOTW: bound on one xDS response (0: gRPC's 4 MiB)")
}

// settings returns the xDS settings, nil in FILE mode.
func (r *rlsXDSFlags) settings() *xds.Settings {
	if r.configType.String() != configTypeXDS {
		return nil
	}
	s := r.s
	return &s
}
