package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Every bad value of the reference's xDS variables stops `sluice serve`
// at start with an error naming the variable (or its flag with it).
func TestServeRLSXDSBadEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"config type", map[string]string{"CONFIG_TYPE": "REDIS"}, `CONFIG_TYPE="REDIS"`},
		{"retry interval", map[string]string{"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL": "3"}, "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL="},
		{"use TLS", map[string]string{"CONFIG_GRPC_XDS_SERVER_USE_TLS": "maybe"}, "CONFIG_GRPC_XDS_SERVER_USE_TLS="},
		{"node metadata", map[string]string{"CONFIG_GRPC_XDS_NODE_METADATA": "a=1,b"}, "CONFIG_GRPC_XDS_NODE_METADATA="},
		{"headers", map[string]string{"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS": "x"}, "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS="},
		{"backoff", map[string]string{"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL": "soon"}, "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL="},
		{"max message", map[string]string{"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES": "4MiB"}, "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES="},
		{"empty server", map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL": ""}, "--rls-xds-server (CONFIG_GRPC_XDS_SERVER_URL): must not be empty"},
		{"empty node id", map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_NODE_ID": ""}, "--rls-xds-node-id (CONFIG_GRPC_XDS_NODE_ID): must not be empty"},
		{"backoff max below initial", map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "XDS_CLIENT_BACKOFF_MAX_INTERVAL": "1s"}, "--rls-xds-backoff-max (XDS_CLIENT_BACKOFF_MAX_INTERVAL)"},
		{"key without cert", map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_USE_TLS": "true", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY": "/k.pem"}, "--rls-xds-tls-key-file (CONFIG_GRPC_XDS_CLIENT_TLS_KEY)"},
		{"CA without TLS", map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_TLS_CACERT": "/ca.pem"}, "--rls-xds-tls (CONFIG_GRPC_XDS_SERVER_USE_TLS)"},
		{"missing CA", map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_USE_TLS": "true", "CONFIG_GRPC_XDS_SERVER_TLS_CACERT": "/nonexistent/ca.pem"}, "--rls-xds-tls-ca-file (CONFIG_GRPC_XDS_SERVER_TLS_CACERT)"},
		{"xDS and a file", map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "SLUICE_RLS_CONFIG": "/etc/rls"}, "--rls-config-type (CONFIG_TYPE): the RLS configuration comes over xDS or from --rls-config, not both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var out bytes.Buffer
			err := runServe(context.Background(), []string{"--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
				"--peer-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0"}, &out, &out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
