package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
)

const rlsUsage = `Usage: sluice rls [--addr HOST:PORT] --domain D --descriptor K=V[,K=V...] [--descriptor ...] [--hits N] [--json]

Sends one Envoy RLS v3 ShouldRateLimit (what Envoy sends) to a node's gRPC
port and prints the overall code and each descriptor's status. Each
--descriptor is one descriptor, its entries in order (K=V, a value may be
empty). The node answers from its --rls-config.

Exit 0 when the overall code is OK, 1 when OVER_LIMIT, 2 on bad flags, an
error or an UNKNOWN answer.

Flags:`

// descriptorsFlag collects repeated --descriptor values.
type descriptorsFlag []*rlcommon.RateLimitDescriptor

func (d *descriptorsFlag) String() string { return fmt.Sprint(len(*d), " descriptors") }

func (d *descriptorsFlag) Set(s string) error {
	desc := &rlcommon.RateLimitDescriptor{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("%q: want KEY=VALUE[,KEY=VALUE...]", s)
		}
		desc.Entries = append(desc.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: k, Value: v})
	}
	*d = append(*d, desc)
	return nil
}

// runRLS sends one ShouldRateLimit; exit 0 OK, 1 over the limit, 2 error.
func runRLS(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rls", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, rlsUsage)
		fs.PrintDefaults()
	}
	var descs descriptorsFlag
	addr := fs.String("addr", defaultAddr, "gRPC address of a Sluice node")
	domain := fs.String("domain", "", "the request's domain (required)")
	fs.Var(&descs, "descriptor", "a descriptor's entries, KEY=VALUE[,KEY=VALUE...]; repeat for more descriptors (at least one)")
	hits := fs.Int64("hits", 0, "the request's hits_addend (0: Envoy's default, 1)")
	asJSON := fs.Bool("json", false, "print the RateLimitResponse as protobuf JSON")
	timeout := fs.Duration("timeout", 2*time.Second, "call timeout")
	var tf tlsFlags
	tf.register(fs)
	describeEnv(fs)
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	case *domain == "":
		return errors.New("--domain: required")
	case len(descs) == 0:
		return errors.New("--descriptor: at least one is required")
	case *hits < 0 || *hits > 1<<32-1:
		return errors.New("--hits: must be 0..4294967295")
	case *timeout <= 0:
		return errors.New("--timeout: must be > 0")
	}
	tcfg, err := tf.config()
	if err != nil {
		return err
	}
	creds := insecure.NewCredentials()
	if tcfg != nil {
		creds = credentials.NewTLS(tcfg)
	}
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req := &rlsv3.RateLimitRequest{Domain: *domain, Descriptors: descs, HitsAddend: uint32(*hits)}
	resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, req)
	if err != nil {
		return unreachable([]string{*addr}, err)
	}
	if *asJSON {
		b, err := protojson.Marshal(resp)
		if err != nil {
			return err
		}
		// protojson varies its spacing on purpose; compact it, so that
		// the same answer prints the same.
		var out bytes.Buffer
		if err := json.Compact(&out, b); err != nil {
			return err
		}
		out.WriteByte('\n')
		if _, err := stdout.Write(out.Bytes()); err != nil {
			return err
		}
	} else {
		printRLSResponse(stdout, descs, resp)
	}
	switch resp.GetOverallCode() {
	case rlsv3.RateLimitResponse_OK:
		return nil
	case rlsv3.RateLimitResponse_OVER_LIMIT:
		return errDenied
	}
	return fmt.Errorf("overall code %v", resp.GetOverallCode())
}

// printRLSResponse prints the overall code, then one line per descriptor:
// its entries, code, and limit (remaining of requests per unit, and when
// the window ends) when it has one.
func printRLSResponse(w io.Writer, descs []*rlcommon.RateLimitDescriptor, resp *rlsv3.RateLimitResponse) {
	fmt.Fprintln(w, resp.GetOverallCode())
	for i, st := range resp.GetStatuses() {
		var entries []string
		if i < len(descs) {
			for _, e := range descs[i].GetEntries() {
				entries = append(entries, e.GetKey()+"="+e.GetValue())
			}
		}
		fmt.Fprintf(w, "  %s: %s", strings.Join(entries, ","), st.GetCode())
		if l := st.GetCurrentLimit(); l != nil {
			fmt.Fprintf(w, ", remaining %d of %d per %s, window ends in %s",
				st.GetLimitRemaining(), l.GetRequestsPerUnit(), strings.ToLower(l.GetUnit().String()),
				humanDuration(st.GetDurationUntilReset().AsDuration()))
		} else {
			fmt.Fprint(w, " (no limit)")
		}
		fmt.Fprintln(w)
	}
}
