package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/sluice-rl/sluice/node"
)

// referenceEnv names the environment twins of the flags that
// envoyproxy/ratelimit reads from the environment under its own names, so
// that its deployments (Envoy Gateway's) configure Sluice unchanged.
var referenceEnv = map[string]string{
	"rls-config-type":                "CONFIG_TYPE",
	"rls-xds-server":                 "CONFIG_GRPC_XDS_SERVER_URL",
	"rls-xds-node-id":                "CONFIG_GRPC_XDS_NODE_ID",
	"rls-xds-node-metadata":          "CONFIG_GRPC_XDS_NODE_METADATA",
	"rls-xds-headers":                "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
	"rls-xds-connect-retry-interval": "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL",
	"rls-xds-tls":                    "CONFIG_GRPC_XDS_SERVER_USE_TLS",
	"rls-xds-tls-cert-file":          "CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
	"rls-xds-tls-key-file":           "CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
	"rls-xds-tls-ca-file":            "CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
	"rls-xds-tls-server-name":        "CONFIG_GRPC_XDS_SERVER_TLS_SAN",
	"rls-xds-backoff-initial":        "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL",
	"rls-xds-backoff-max":            "XDS_CLIENT_BACKOFF_MAX_INTERVAL",
	"rls-xds-max-recv-bytes":         "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES",
}

// envName is the environment twin of a flag: --grpc-addr -> SLUICE_GRPC_ADDR,
// or the reference's name (referenceEnv).
func envName(flagName string) string {
	if e, ok := referenceEnv[flagName]; ok {
		return e
	}
	return "SLUICE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseWithEnv parses args into fs; every flag not given on the command line
// takes its value from its environment twin when that is set. A flag always
// wins over the environment.
func parseWithEnv(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %w", envName(f.Name), v, e)
			}
		}
	})
	return err
}

// describeEnv appends each flag's environment twin to its usage text.
func describeEnv(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) { f.Usage += " (env " + envName(f.Name) + ")" })
}

// listFlag is a comma-separated list flag that may also be repeated.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// replicasFlag is --replicas: "auto" (node.ReplicasAuto, the default), or
// a count of heirs from 0 (off) to node.MaxReplicas.
type replicasFlag struct{ n *int }

func (r replicasFlag) String() string {
	switch {
	case r.n == nil: // flag's zero value
		return ""
	case *r.n == node.ReplicasAuto:
		return "auto"
	}
	return strconv.Itoa(*r.n)
}

func (r replicasFlag) Set(v string) error {
	if v == "auto" {
		*r.n = node.ReplicasAuto
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > node.MaxReplicas {
		return fmt.Errorf("must be auto, 0 (off) or 1 to %d", node.MaxReplicas)
	}
	*r.n = n
	return nil
}
