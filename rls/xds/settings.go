package xds

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// ErrInvalidSettings wraps every error of Settings.Validate and New about
// the settings, each a *SettingsError naming the field.
var ErrInvalidSettings = errors.New("xds: invalid settings")

// SettingsError is an invalid setting: the Settings field and why.
type SettingsError struct {
	Field, Reason string
}

func (e *SettingsError) Error() string {
	return ErrInvalidSettings.Error() + ": " + e.Field + ": " + e.Reason
}

// Unwrap returns ErrInvalidSettings.
func (e *SettingsError) Unwrap() error { return ErrInvalidSettings }

func settingsErr(field, format string, args ...any) error {
	return &SettingsError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// The reference's defaults (envoyproxy/ratelimit src/settings/settings.go).
const (
	DefaultServerURL            = "localhost:18000"
	DefaultNodeID               = "default"
	DefaultConnectRetryInterval = 3 * time.Second
	DefaultBackoffInitial       = 10 * time.Second
	DefaultBackoffMax           = 60 * time.Second
	// backoffRandomFactor is the reference's XDS_CLIENT_BACKOFF_RANDOM_FACTOR.
	backoffRandomFactor = 0.5
)

// Settings are the reference's CONFIG_GRPC_XDS_* and XDS_CLIENT_*
// settings; each field's comment names its variable.
type Settings struct {
	// ServerURL is the management server's gRPC target
	// (CONFIG_GRPC_XDS_SERVER_URL).
	ServerURL string
	// NodeID is the xDS node id the server keys its snapshots by
	// (CONFIG_GRPC_XDS_NODE_ID).
	NodeID string
	// NodeMetadata is the node's metadata, "key=value" pairs separated by
	// commas (CONFIG_GRPC_XDS_NODE_METADATA).
	NodeMetadata string
	// Headers are gRPC metadata sent on the stream, "key:value" pairs
	// separated by commas (CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS).
	Headers string
	// ConnectRetryInterval is the base delay of the connection's own
	// reconnects (CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL).
	ConnectRetryInterval time.Duration
	// UseTLS dials the server with TLS (CONFIG_GRPC_XDS_SERVER_USE_TLS).
	UseTLS bool
	// TLSCertFile and TLSKeyFile are the PEM client certificate and key
	// presented to the server (CONFIG_GRPC_XDS_CLIENT_TLS_CERT, _KEY).
	TLSCertFile, TLSKeyFile string
	// TLSCAFile is the PEM bundle that verifies the server; empty means
	// the system's roots (CONFIG_GRPC_XDS_SERVER_TLS_CACERT).
	TLSCAFile string
	// TLSServerName is the name the server's certificate must carry;
	// empty means the host of ServerURL (CONFIG_GRPC_XDS_SERVER_TLS_SAN).
	TLSServerName string
	// BackoffInitial and BackoffMax bound the wait before a broken stream
	// is opened again, doubling from one to the other with a random
	// factor of 0.5 (XDS_CLIENT_BACKOFF_INITIAL_INTERVAL, _MAX_INTERVAL).
	BackoffInitial, BackoffMax time.Duration
	// MaxRecvBytes bounds one received response; 0 means gRPC's default
	// of 4 MiB (XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES).
	MaxRecvBytes int
}

// DefaultSettings returns the reference's defaults.
func DefaultSettings() Settings {
	return Settings{ServerURL: DefaultServerURL, NodeID: DefaultNodeID,
		ConnectRetryInterval: DefaultConnectRetryInterval,
		BackoffInitial:       DefaultBackoffInitial, BackoffMax: DefaultBackoffMax}
}

// ParsePairs parses "k<sep>v,k2<sep>v2" (empty is none); an entry
// without sep, or with an empty key, is an error.
func ParsePairs(s string, sep byte) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, e := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(e, string(sep))
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("entry %q is not key%cvalue", e, sep)
		}
		out[k] = strings.TrimSpace(v)
	}
	return out, nil
}

// Validate returns an error naming the first invalid field.
func (s Settings) Validate() error {
	fail := settingsErr
	switch {
	case strings.TrimSpace(s.ServerURL) == "":
		return fail("ServerURL", "must not be empty")
	case s.NodeID == "":
		return fail("NodeID", "must not be empty")
	case s.ConnectRetryInterval <= 0:
		return fail("ConnectRetryInterval", "must be > 0, got %v", s.ConnectRetryInterval)
	case s.BackoffInitial <= 0:
		return fail("BackoffInitial", "must be > 0, got %v", s.BackoffInitial)
	case s.BackoffMax < s.BackoffInitial:
		return fail("BackoffMax", "must be >= BackoffInitial (%v), got %v", s.BackoffInitial, s.BackoffMax)
	case s.MaxRecvBytes < 0:
		return fail("MaxRecvBytes", "must be >= 0, got %d", s.MaxRecvBytes)
	case (s.TLSCertFile == "") != (s.TLSKeyFile == ""):
		return fail("TLSKeyFile", "TLSCertFile and TLSKeyFile go together")
	case !s.UseTLS && (s.TLSCertFile != "" || s.TLSCAFile != "" || s.TLSServerName != ""):
		return fail("UseTLS", "TLS files or a server name are set but UseTLS is false")
	}
	if _, err := ParsePairs(s.NodeMetadata, '='); err != nil {
		return fail("NodeMetadata", "%v", err)
	}
	if _, err := ParsePairs(s.Headers, ':'); err != nil {
		return fail("Headers", "%v", err)
	}
	return nil
}

// tlsConfig returns the client TLS configuration, nil without UseTLS.
func (s Settings) tlsConfig() (*tls.Config, error) {
	if !s.UseTLS {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.TLSServerName}
	if s.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(s.TLSCertFile, s.TLSKeyFile)
		if err != nil {
			return nil, settingsErr("TLSCertFile", "%s: %v", s.TLSCertFile, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	if s.TLSCAFile != "" {
		pem, err := os.ReadFile(s.TLSCAFile)
		if err != nil {
			return nil, settingsErr("TLSCAFile", "%v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, settingsErr("TLSCAFile", "%s: no PEM certificate in it", s.TLSCAFile)
		}
		c.RootCAs = pool
	}
	return c, nil
}
