package main

import (
	"errors"
	"regexp"
	"slices"
	"strings"
)

// serveFlags maps the settings that node.New's errors name (node.Config
// fields, and the cluster.Config fields node fills from flags) to the
// `sluice serve` flags that set them, so that an operator reads
// "--tls-cert-file (/etc/tls.crt): no such file", not the Go field.
var serveFlags = map[string]string{
	"NodeName":                     "node-name",
	"GRPCAddr":                     "grpc-addr",
	"HTTPAddr":                     "http-addr",
	"PeerAddr":                     "peer-addr",
	"PeerAdvertiseAddr":            "peer-advertise-addr",
	"TLSCertFile":                  "tls-cert-file",
	"TLSKeyFile":                   "tls-key-file",
	"TLSClientCAFile":              "tls-client-ca-file",
	"PeerTLSCertFile":              "peer-tls-cert-file",
	"PeerTLSKeyFile":               "peer-tls-key-file",
	"PeerTLSCAFile":                "peer-tls-ca-file",
	"PeerTLSName":                  "peer-tls-name",
	"GossipAddr":                   "gossip-addr",
	"BindAddr":                     "gossip-addr", // cluster.Config
	"GRPCAdvertiseAddr":            "grpc-advertise-addr",
	"GossipAdvertiseAddr":          "gossip-advertise-addr",
	"AdvertiseAddr":                "gossip-advertise-addr", // cluster.Config
	"GossipKeyFile":                "gossip-key-file",
	"GossipKeys":                   "cluster-secret-file", // cluster.Config, derived from the secret
	"ClusterSecretFile":            "cluster-secret-file",
	"Insecure":                     "insecure",
	"AdminNames":                   "admin-names",
	"AdminTokenFile":               "admin-token-file",
	"Join":                         "join",
	"BootstrapExpect":              "bootstrap-expect",
	"PeerTimeout":                  "peer-timeout",
	"BatchWindow":                  "batch-window",
	"Replicas":                     "replicas",
	"ReplicationInterval":          "replication-interval",
	"DataDir":                      "data-dir",
	"DataSyncInterval":             "data-sync-interval",
	"PolicyFile":                   "config",
	"RLSConfig":                    "rls-config",
	"RLSXDS":                       "rls-config-type",
	"RLSXDS.ServerURL":             "rls-xds-server",
	"RLSXDS.NodeID":                "rls-xds-node-id",
	"RLSXDS.NodeMetadata":          "rls-xds-node-metadata",
	"RLSXDS.Headers":               "rls-xds-headers",
	"RLSXDS.ConnectRetryInterval":  "rls-xds-connect-retry-interval",
	"RLSXDS.UseTLS":                "rls-xds-tls",
	"RLSXDS.TLSCertFile":           "rls-xds-tls-cert-file",
	"RLSXDS.TLSKeyFile":            "rls-xds-tls-key-file",
	"RLSXDS.TLSCAFile":             "rls-xds-tls-ca-file",
	"RLSXDS.TLSServerName":         "rls-xds-tls-server-name",
	"RLSXDS.BackoffInitial":        "rls-xds-backoff-initial",
	"RLSXDS.BackoffMax":            "rls-xds-backoff-max",
	"RLSXDS.MaxRecvBytes":          "rls-xds-max-recv-bytes",
	"ShutdownTimeout":              "shutdown-timeout",
	"MaxLeaseTTL":                  "max-lease-ttl",
	"MaxKeysPerClient":             "max-keys-per-client", // store.Config
	"UIKeys":                       "ui-keys",
	"Bounds.HTTPReadHeaderTimeout": "http-read-header-timeout",
	"Bounds.HTTPReadTimeout":       "http-read-timeout",
	"Bounds.HTTPWriteTimeout":      "http-write-timeout",
	"Bounds.HTTPIdleTimeout":       "http-idle-timeout",
	"Bounds.HTTPMaxHeaderBytes":    "http-max-header-bytes",
	"Bounds.HTTPMaxBodyBytes":      "http-max-body-bytes",
	"Bounds.GRPCMaxRecvBytes":      "grpc-max-recv-bytes",
	"Bounds.MaxConns":              "max-conns",
	"Bounds.MaxStreamsPerConn":     "max-streams-per-conn",
	"Bounds.MaxInflightPerConn":    "max-inflight-per-conn",
	"Bounds.MaxInflight":           "max-inflight",
	"Bounds.ShedMemoryShare":       "shed-memory-share",
}

// serveFieldRE matches the names of serveFlags as whole words (so that
// TLSCertFile is not found inside PeerTLSCertFile), longest first.
var serveFieldRE = func() *regexp.Regexp {
	names := make([]string, 0, len(serveFlags))
	for f := range serveFlags {
		names = append(names, regexp.QuoteMeta(f))
	}
	slices.SortFunc(names, func(a, b string) int { return len(b) - len(a) })
	return regexp.MustCompile(`\b(?:` + strings.Join(names, "|") + `)\b`)
}()

// flagNamedError is an error whose message names flags where the
// original named Config fields; it unwraps to the original.
type flagNamedError struct {
	msg string
	err error
}

func (e *flagNamedError) Error() string { return e.msg }
func (e *flagNamedError) Unwrap() error { return e.err }

// nameFlags rewrites the Config fields named in err's message as the
// `sluice serve` flags that set them; errors.Is and errors.As still see
// the original. nil stays nil.
func nameFlags(err error) error {
	if err == nil {
		return nil
	}
	msg := serveFieldRE.ReplaceAllStringFunc(err.Error(), func(f string) string {
		name := "--" + serveFlags[f]
		if e, ok := referenceEnv[serveFlags[f]]; ok {
			name += " (" + e + ")"
		}
		return name
	})
	if msg == err.Error() {
		return err
	}
	var fe *flagNamedError
	if errors.As(err, &fe) {
		return err
	}
	return &flagNamedError{msg: msg, err: err}
}
