package xds

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/client/sotw/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sluice-rl/sluice/rls"
)

// Config configures a Client.
type Config struct {
	// Settings are the reference's settings; see Settings.Validate.
	Settings Settings
	// Options are passed to rls.Parse (MERGE_DOMAIN_CONFIG).
	Options rls.Options
	// Apply receives every new valid configuration, one call at a time,
	// from Run's goroutine. Required.
	Apply func(*rls.Config)
	// Rejected, if not nil, receives the error of every response NACKed;
	// the configuration in force stays.
	Rejected func(error)
	// Logger receives connections, updates and rejections; nil means
	// slog.Default().
	Logger *slog.Logger
}

// Client keeps the RLS configuration up to date from an xDS management
// server; Run does the work.
type Client struct {
	cfg     Config
	log     *slog.Logger
	node    *corev3.Node
	headers metadata.MD
	dial    []grpc.DialOption

	mu  sync.Mutex
	cur *rls.Config // nil until the first valid response
}

// New checks the configuration and prepares the client; it connects
// nothing (Run does).
func New(cfg Config) (*Client, error) {
	if cfg.Apply == nil {
		return nil, settingsErr("Apply", "is required")
	}
	s := cfg.Settings
	if err := s.Validate(); err != nil {
		return nil, err
	}
	tc, err := s.tlsConfig()
	if err != nil {
		return nil, err
	}
	md, _ := ParsePairs(s.NodeMetadata, '=') // checked by Validate
	hd, _ := ParsePairs(s.Headers, ':')
	fields := make(map[string]*structpb.Value, len(md))
	for k, v := range md {
		fields[k] = structpb.NewStringValue(v)
	}
	c := &Client{cfg: cfg, log: cfg.Logger, headers: metadata.New(hd),
		node: &corev3.Node{Id: s.NodeID, Metadata: &structpb.Struct{Fields: fields}}}
	if c.log == nil {
		c.log = slog.Default()
	}
	creds := insecure.NewCredentials()
	if tc != nil {
		creds = credentials.NewTLS(tc)
	}
	cp := grpc.ConnectParams{MinConnectTimeout: 20 * time.Second}
	cp.Backoff.BaseDelay, cp.Backoff.Multiplier, cp.Backoff.Jitter = s.ConnectRetryInterval, 1.6, 0.2
	cp.Backoff.MaxDelay = max(s.ConnectRetryInterval, s.BackoffMax)
	c.dial = []grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithConnectParams(cp)}
	if s.MaxRecvBytes > 0 {
		c.dial = append(c.dial, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(s.MaxRecvBytes)))
	}
	return c, nil
}

// Config returns the configuration in force, nil before the first valid
// response.
func (c *Client) Config() *rls.Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

// Run streams from the server until ctx is done, opening the stream again
// after a backoff when it breaks. It returns nil when ctx is done, or the
// error of a server address gRPC cannot parse.
func (c *Client) Run(ctx context.Context) error {
	s := c.cfg.Settings
	conn, err := grpc.NewClient(s.ServerURL, c.dial...)
	if err != nil {
		return settingsErr("ServerURL", "%v", err)
	}
	defer conn.Close()
	bo := &backoff.ExponentialBackOff{InitialInterval: s.BackoffInitial, MaxInterval: s.BackoffMax,
		RandomizationFactor: backoffRandomFactor, Multiplier: 2}
	bo.Reset()
	for {
		got, err := c.stream(ctx, conn)
		if ctx.Err() != nil {
			return nil
		}
		if got {
			bo.Reset()
		}
		wait := bo.NextBackOff()
		c.log.Warn("rls: xDS stream broken; opening it again", "server", s.ServerURL, "in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// stream runs one ADS stream until it breaks; got reports whether it
// received a response.
func (c *Client) stream(ctx context.Context, conn *grpc.ClientConn) (got bool, err error) {
	sctx, cancel := context.WithCancel(metadata.NewOutgoingContext(ctx, c.headers))
	defer cancel()
	ads := sotw.NewADSClient(sctx, c.node, TypeURL)
	if err := ads.InitConnect(conn, grpc.WaitForReady(true)); err != nil {
		return false, err
	}
	c.log.Info("rls: xDS stream open", "server", c.cfg.Settings.ServerURL, "node_id", c.node.GetId())
	// A SotW server answers a NACK with its snapshot again at once
	// (go-control-plane's cache does), so the same rejected resources
	// come back: their NACK is repeated no more than once per
	// ConnectRetryInterval, and logged and counted once.
	var rejectedKey, rejectedMsg string
	for {
		resp, err := ads.Fetch()
		if err != nil {
			return got, err
		}
		got = true
		if key := resourcesKey(resp); key == rejectedKey {
			t := time.NewTimer(c.cfg.Settings.ConnectRetryInterval)
			select {
			case <-sctx.Done():
				t.Stop()
				return got, sctx.Err()
			case <-t.C:
			}
			if err := ads.Nack(rejectedMsg); err != nil {
				return got, err
			}
			continue
		} else if err := c.update(resp); err != nil {
			rejectedKey, rejectedMsg = key, err.Error()
			if nerr := ads.Nack(rejectedMsg); nerr != nil {
				return got, nerr
			}
			continue
		}
		rejectedKey = ""
		if err := ads.Ack(); err != nil {
			return got, err
		}
	}
}

// resourcesKey identifies a response's resources.
func resourcesKey(resp *sotw.Response) string {
	h := sha256.New()
	for _, r := range resp.Resources {
		fmt.Fprintf(h, "%d:%s%d:", len(r.GetTypeUrl()), r.GetTypeUrl(), len(r.GetValue()))
		h.Write(r.GetValue())
	}
	return string(h.Sum(nil))
}

// update applies a response's configuration, or returns why it cannot.
func (c *Client) update(resp *sotw.Response) error {
	n, err := Convert(resp.Resources, c.cfg.Options)
	if err != nil {
		c.log.Error("rls: xDS config rejected (NACK); keeping the one in force", "err", err)
		if c.cfg.Rejected != nil {
			c.cfg.Rejected(err)
		}
		return err
	}
	c.mu.Lock()
	same := c.cur != nil && c.cur.Digest == n.Digest
	if !same {
		c.cur = n
	}
	c.mu.Unlock()
	if same {
		c.log.Debug("rls: xDS config unchanged")
		return nil
	}
	for _, w := range n.Warnings {
		c.log.Warn("rls: config", "warning", w)
	}
	c.cfg.Apply(n)
	c.log.Info("rls: xDS config applied (ACK)", "resources", len(n.Files), "domains", len(n.Domains()))
	return nil
}
