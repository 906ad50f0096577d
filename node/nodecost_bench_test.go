package node_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/node"
)

// BenchmarkNodeCheck is the node's own cost of one grants-off check of one
// item: a node in this process, its caller in another (this test binary
// run again as a client, see benchClientMain), so that -benchmem counts
// the node's allocations alone. "grpc" is the Go client's routed stream
// (CheckStream), "http" a POST /v1/check of one item over a kept-alive
// connection; callers=1 sends each check after the previous answer,
// callers=8 from 8 goroutines at once. make bench-check runs
// grpc/callers=1 and http/callers=1 under valgrind's callgrind, which
// counts the instructions between callgrindZero and callgrindDump:
//
//	go test -run '^$' -bench NodeCheck -benchmem ./node/
func BenchmarkNodeCheck(b *testing.B) {
	for _, proto := range []string{"grpc", "http"} {
		for _, callers := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/callers=%d", proto, callers), func(b *testing.B) {
				// The replication of changed states runs every 50ms by
				// default: under callgrind, where a check takes some
				// 50 times longer, its cost per interval would weigh
				// per check, and vary with the machine's load.
				n := startNode(b, func(c *node.Config) { c.ReplicationInterval = time.Minute })
				addr := n.GRPCAddr()
				if proto == "http" {
					addr = n.HTTPAddr()
				}
				c := startBenchClient(b, proto, addr, callers)
				c.run(b, 200*callers) // connect, open the stream, create the keys
				b.ReportAllocs()
				b.ResetTimer()
				stop := startProfile(b, os.Getenv(benchNodeProfile))
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				callgrindZero()
				cpu := cpuTime()
				clientCPU := c.run(b, b.N)
				nodeCPU := cpuTime() - cpu
				callgrindDump()
				runtime.ReadMemStats(&m1)
				stop()
				// allocs/op, unrounded: make bench-check allows half an
				// allocation for the node's background work (gossip,
				// timers), whose share per check varies with the load.
				b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(b.N), "node-allocs/op")
				b.ReportMetric(float64(nodeCPU.Nanoseconds())/float64(b.N), "node-cpu-ns/op")
				b.ReportMetric(float64(clientCPU.Nanoseconds())/float64(b.N), "client-cpu-ns/op")
			})
		}
	}
}

// callgrindZero and callgrindDump mark the measured part of
// BenchmarkNodeCheck for valgrind --tool=callgrind --zero-before and
// --dump-before (tools/bench-check.sh).
//
//go:noinline
func callgrindZero() {}

//go:noinline
func callgrindDump() {}

// underCallgrind reports whether make bench-check runs the benchmark
// under callgrind.
func underCallgrind() bool { return os.Getenv("SLUICE_BENCH_CALLGRIND") != "" }

// benchClientEnv names the client to run instead of the tests: "grpc",
// "http" or "echo" (BenchmarkGRPCEchoFloor); benchClientAddr and benchClientCallers say where and how.
const (
	benchClientEnv     = "SLUICE_BENCH_CLIENT"
	benchClientAddr    = "SLUICE_BENCH_ADDR"
	benchClientCallers = "SLUICE_BENCH_CALLERS"
	// benchClientProfile, set when the benchmark starts, names the file
	// of the client's CPU profile (docs/benchmarks.md's breakdown).
	benchClientProfile = "SLUICE_BENCH_CLIENT_CPUPROFILE"
	// benchNodeProfile names the file of the node's CPU profile over the
	// measured checks.
	benchNodeProfile = "SLUICE_BENCH_NODE_CPUPROFILE"
)

// startProfile profiles the CPU into path ("": not at all) until stop.
func startProfile(b *testing.B, path string) (stop func()) {
	stop, err := cpuProfile(path)
	if err != nil {
		b.Fatal(err)
	}
	return stop
}

// cpuProfile profiles the CPU into path ("": not at all).
func cpuProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

// benchClient is the client process of BenchmarkNodeCheck: each line
// written to it is a number of checks to make, and it answers "ok" when
// they are done.
type benchClient struct {
	in  io.WriteCloser
	out *bufio.Reader
}

func startBenchClient(b *testing.B, proto, addr string, callers int) *benchClient {
	if underCallgrind() {
		// valgrind 3.19's callgrind aborts on the SIGCHLD of a client
		// that exits ("vgCallgrind_post_signal: Assertion"): with
		// SIGCHLD ignored, the kernel reaps the client, unseen.
		signal.Ignore(syscall.SIGCHLD)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), benchClientEnv+"="+proto, benchClientAddr+"="+addr,
		benchClientCallers+"="+strconv.Itoa(callers))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = in.Close() // the client exits at the end of its input
		if err := cmd.Wait(); err != nil && !underCallgrind() {
			b.Errorf("bench client: %v", err)
		}
	})
	return &benchClient{in: in, out: bufio.NewReader(out)}
}

// run makes the client do n checks, waits for them, and returns the CPU
// time (user and system) the client spent on them.
func (c *benchClient) run(b *testing.B, n int) time.Duration {
	if _, err := fmt.Fprintf(c.in, "%d\n", n); err != nil {
		b.Fatal(err)
	}
	line, err := c.out.ReadString('\n')
	ns, ok := strings.CutPrefix(strings.TrimSpace(line), "ok ")
	cpu, perr := strconv.ParseInt(ns, 10, 64)
	if err != nil || !ok || perr != nil {
		b.Fatalf("bench client: %q, %v", line, err)
	}
	return time.Duration(cpu)
}

// cpuTime is the CPU time (user and system) of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchClientMain runs the client of BenchmarkNodeCheck when the test
// binary was started as one, and reports whether it was.
func benchClientMain() bool {
	proto := os.Getenv(benchClientEnv)
	if proto == "" {
		return false
	}
	if err := runBenchClient(proto, os.Getenv(benchClientAddr), os.Getenv(benchClientCallers)); err != nil {
		fmt.Fprintln(os.Stderr, "bench client:", err)
		os.Exit(1)
	}
	return true
}

func runBenchClient(proto, addr, callersText string) error {
	callers, err := strconv.Atoi(callersText)
	if err != nil || callers < 1 {
		return fmt.Errorf("%s: %q: want a number of callers >= 1", benchClientCallers, callersText)
	}
	var check func(caller int) error
	switch proto {
	case "grpc":
		c, err := client.New(client.Config{Addrs: []string{addr}})
		if err != nil {
			return err
		}
		defer c.Close()
		items := make([]client.Item, callers)
		for i := range items {
			items[i] = client.Item{Key: "bench:" + strconv.Itoa(i), Limit: client.Limit{Limit: 1e9, Period: time.Second}}
		}
		check = func(caller int) error {
			_, err := c.Check(context.Background(), items[caller])
			return err
		}
	case "http":
		tr := &http.Transport{MaxIdleConnsPerHost: callers}
		defer tr.CloseIdleConnections()
		hc := &http.Client{Transport: tr}
		url := "http://" + addr + "/v1/check"
		bodies := make([][]byte, callers)
		for i := range bodies {
			bodies[i] = fmt.Appendf(nil, `{"checks":[{"key":"bench:%d","limit":1000000000,"period":"1s"}]}`, i)
		}
		check = func(caller int) error {
			resp, err := hc.Post(url, "application/json", bytes.NewReader(bodies[caller]))
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("POST /v1/check: %s", resp.Status)
			}
			return nil
		}
	case "echo": // BenchmarkGRPCEchoFloor
		var closeEcho func()
		if check, closeEcho, err = echoClient(addr, callers); err != nil {
			return err
		}
		defer closeEcho()
	default:
		return fmt.Errorf("%s: %q: want grpc, http or echo", benchClientEnv, proto)
	}
	stop, err := cpuProfile(os.Getenv(benchClientProfile))
	if err != nil {
		return err
	}
	defer stop()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		n, err := strconv.Atoi(strings.TrimSpace(in.Text()))
		if err != nil {
			return fmt.Errorf("stdin: %q: want a number of checks", in.Text())
		}
		cpu := cpuTime()
		callgrindZero() // the client's count too, under valgrind --trace-children=yes
		if err := runChecks(n, callers, check); err != nil {
			return err
		}
		callgrindDump()
		fmt.Println("ok", int64(cpuTime()-cpu))
	}
	return in.Err()
}

// runChecks makes n checks from callers goroutines, as evenly as they
// divide, and returns the first error.
func runChecks(n, callers int, check func(caller int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for g := range callers {
		share := n / callers
		if g < n%callers {
			share++
		}
		wg.Go(func() {
			for range share {
				if err := check(g); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}
