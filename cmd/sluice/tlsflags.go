package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
)

// tlsFlags are the TLS flags of the commands that call a node (check,
// usage, members, bench).
type tlsFlags struct {
	caFile, certFile, keyFile, serverName string
}

func (tf *tlsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&tf.caFile, "tls-ca-file", "", "PEM CA bundle that verifies the nodes' certificates; setting any --tls-* flag turns TLS on (default roots: the system's)")
	fs.StringVar(&tf.certFile, "tls-cert-file", "", "PEM client certificate, for nodes that require one (mTLS); needs --tls-key-file")
	fs.StringVar(&tf.keyFile, "tls-key-file", "", "PEM private key of --tls-cert-file")
	fs.StringVar(&tf.serverName, "tls-server-name", "", "name expected in the nodes' certificates (default: the host of --addr)")
}

// config returns the TLS configuration the flags describe, nil when no
// TLS flag is set (plaintext). Errors name the flag.
func (tf *tlsFlags) config() (*tls.Config, error) {
	if tf.caFile == "" && tf.certFile == "" && tf.keyFile == "" && tf.serverName == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: tf.serverName}
	if tf.caFile != "" {
		b, err := os.ReadFile(tf.caFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca-file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("--tls-ca-file: %s: no PEM certificate", tf.caFile)
		}
	}
	switch {
	case tf.certFile != "" && tf.keyFile == "":
		return nil, errors.New("--tls-key-file: required with --tls-cert-file")
	case tf.certFile == "" && tf.keyFile != "":
		return nil, errors.New("--tls-cert-file: required with --tls-key-file")
	case tf.certFile != "":
		pair, err := tls.LoadX509KeyPair(tf.certFile, tf.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert-file/--tls-key-file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
