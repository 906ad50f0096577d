//go:build flood

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/internal/testcerts"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// TestFloodMeasure is the issue's measurement, against a real `sluice
// serve` with mTLS (SLUICE_FLOOD_BIN picks another binary, e.g. main's;
// SLUICE_FLOOD_STREAMS another number of flooding streams, 0 for the
// other client's latency on this machine without a flood;
// SLUICE_FLOOD_ELSEWHERE=1 floods a second node, to tell the test
// process's own share of the other client's latency;
// SLUICE_FLOOD_OTHER_PROC=1 also runs the other client as a process of its
// own, `sluice bench` at 100 checks/s open loop, and logs its summary;
// SLUICE_FLOOD_WARM=1 connects the other client before the flood):
// one client connection with 100 CheckStream streams sending without
// reading for 10 s, while another client checks one key at a time. It
// reports the node's peak goroutines and RSS and the other client's p99
// and errors (go test -tags flood -run TestFloodMeasure -v ./cmd/sluice/).
func TestFloodMeasure(t *testing.T) {
	if b := os.Getenv("SLUICE_FLOOD_BIN"); b != "" {
		sluiceBin = b
	}
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "ca")
	caFile := testcerts.Write(t, dir, "ca.crt", ca.PEM)
	cert, key := testcerts.WritePair(t, dir, "node", ca.PeerAndServer(t, "node", "sluice-peer"))
	s := startServer(t, "--tls-cert-file", cert, "--tls-key-file", key, "--tls-client-ca-file", caFile, "--memory-limit", "900MiB")
	pair := ca.Client(t, "flood")
	cfg := testcerts.ClientConfig(t, ca.PEM, &pair)

	target := s.grpc
	if os.Getenv("SLUICE_FLOOD_ELSEWHERE") == "1" {
		target = startServer(t, "--tls-cert-file", cert, "--tls-key-file", key, "--tls-client-ca-file", caFile, "--memory-limit", "900MiB").grpc
	}
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(credentials.NewTLS(cfg)),
		grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	streams := 100
	if v := os.Getenv("SLUICE_FLOOD_STREAMS"); v != "" {
		if streams, err = strconv.Atoi(v); err != nil {
			t.Fatalf("SLUICE_FLOOD_STREAMS: %v", err)
		}
	}
	other, err := client.New(client.Config{Addrs: []string{s.grpc}, Timeout: 5 * time.Second, DisableRouting: true, TLS: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if os.Getenv("SLUICE_FLOOD_WARM") == "1" { // connected before the flood
		if _, err := other.Check(ctx, client.Item{Key: "other", Limit: client.Limit{Limit: 1_000_000, Period: time.Hour}}); err != nil {
			t.Fatal(err)
		}
	}
	cpu0, self0 := cpuTime(s.cmd.Process.Pid), cpuTime(os.Getpid())
	var sent atomic.Int64
	var wg sync.WaitGroup
	for i := range streams {
		st, err := sluicev1.NewRateLimiterClient(cc).CheckStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; ctx.Err() == nil; j++ {
				req := &sluicev1.CheckStreamRequest{Id: uint64(j), Items: make([]*sluicev1.CheckItem, 20)}
				for k := range req.Items {
					req.Items[k] = &sluicev1.CheckItem{Key: "flood-" + strconv.Itoa(i) + "-" + strconv.Itoa(k),
						Spec: &sluicev1.CheckItem_Limit{Limit: &sluicev1.Limit{Limit: 1_000_000, Period: durationpb.New(time.Hour)}}}
				}
				if st.Send(req) != nil {
					return
				}
				sent.Add(1)
			}
		}()
	}
	var benchOut []byte
	benchDone := make(chan struct{})
	if os.Getenv("SLUICE_FLOOD_OTHER_PROC") == "1" {
		bc, bk := testcerts.WritePair(t, dir, "bench", pair)
		go func() {
			defer close(benchDone)
			benchOut, _ = exec.Command(sluiceBin, "bench", "--addr", s.grpc, "--rate", "100", "--workers", "1", "--keys", "1",
				"--limit", "1000000", "--duration", "9s", "--json", "--tls-ca-file", caFile, "--tls-cert-file", bc, "--tls-key-file", bk).CombinedOutput()
		}()
	} else {
		close(benchDone)
	}
	var lat []time.Duration
	errs := 0
	peakG := 0
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	var peakMu sync.Mutex
	sampled := make(chan struct{})
	go func() { // the node's goroutines, 5 times a second
		defer close(sampled)
		for ctx.Err() == nil {
			g := goroutines(hc, s.http)
			peakMu.Lock()
			peakG = max(peakG, g)
			peakMu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	for ctx.Err() == nil {
		start := time.Now()
		c, cancelOne := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := other.Check(c, client.Item{Key: "other", Limit: client.Limit{Limit: 1_000_000, Period: time.Hour}})
		cancelOne()
		lat = append(lat, time.Since(start))
		if err == nil {
			err = res[0].Err
		}
		if err != nil {
			if errs == 0 {
				t.Logf("first error: %v", err)
			}
			errs++
		}
		time.Sleep(10 * time.Millisecond) // the other client's pace: 100 checks/s at most
	}
	<-sampled
	<-benchDone
	if benchOut != nil {
		t.Logf("other client as its own process (sluice bench): %s", benchOut)
	}
	rss := vmHWM(s.cmd.Process.Pid)
	cpu, self := cpuTime(s.cmd.Process.Pid)-cpu0, cpuTime(os.Getpid())-self0
	slices.Sort(lat)
	p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
	t.Logf("flood: %d messages sent in 10 s, test process CPU %s; node: CPU %s, peak goroutines %d, peak RSS %d MiB; other client: %d checks, %d errors, p50 %s p99 %s max %s",
		sent.Load(), self, cpu, peakG, rss>>20, len(lat), errs, p(0.5), p(0.99), lat[len(lat)-1])
	cc.Close()
	wg.Wait()
}

// goroutines reads go_goroutines from the node's /metrics.
func goroutines(hc *http.Client, httpAddr string) int {
	resp, err := hc.Get("https://" + httpAddr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "go_goroutines "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int(n)
		}
	}
	return -1
}

// vmHWM is the peak RSS of pid, in bytes.
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return -1
}

// cpuTime is the CPU time pid has used (user and system), at clock ticks
// of 10 ms.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	_, after, _ := strings.Cut(string(b), ") ") // the command may hold spaces
	f := strings.Fields(after)
	if len(f) < 13 {
		return -1
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}
