package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/internal/bench"
)

// The limit of every key in scenarios a-d: 100 per second, burst 100.
const (
	limitN      = 100
	limitBurst  = 100
	limitPeriod = time.Second
	callTimeout = 2 * time.Second
	// Scenario e: the filled keys' limit, long enough that none expires
	// while the memory is read.
	memPeriod = time.Hour
	// memBatch is the number of keys per call (Sluice) or pipeline (Redis)
	// when filling scenario e; memFillers the goroutines that do it.
	memBatch   = 1000
	memFillers = 4
	// fullKeysE is the key count scenario e's target is stated for.
	fullKeysE = 10_000_000
)

// scenario is one load shape, run against every system with the same engine
// settings.
type scenario struct {
	ID      string
	Title   string
	Short   string // for the headline table
	Workers int
	Keys    int
	Hot     bool
	Rate    float64 // > 0: open loop at this many checks/s
}

var scenarios = []scenario{
	{ID: "a", Title: "1,000 keys uniform, 8 callers, closed loop", Short: "1,000 keys, 8 callers",
		Workers: 8, Keys: 1000},
	{ID: "b", Title: "1,000 keys uniform, 64 callers, closed loop", Short: "1,000 keys, 64 callers",
		Workers: 64, Keys: 1000},
	{ID: "c", Title: "one hot key, 64 callers, closed loop", Short: "1 hot key, 64 callers",
		Workers: 64, Keys: 1, Hot: true},
	{ID: "d", Title: "open loop, 100,000 checks/s offered, 1,000 keys, 512 senders", Short: "open loop 100k/s offered",
		Workers: 512, Keys: 1000, Rate: 100_000},
}

// runner holds the servers and the results of one run.
type runner struct {
	o              *options
	stdout, stderr io.Writer
	cs             *children

	sluice    []*sluiceNode
	sluiceErr error
	redis     *child
	redisAddr string
	redisErr  error
	redisBin  string
	echo      *child
	echoAddr  string
	echoErr   error

	rep *Report
}

func newRunner(o *options, stdout, stderr io.Writer) (*runner, error) {
	cs, err := newChildren()
	if err != nil {
		return nil, err
	}
	return &runner{o: o, stdout: stdout, stderr: stderr, cs: cs}, nil
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.stderr, "benchcompare: "+format+"\n", args...)
}

// runAll starts the servers and runs the scenarios chosen. The report holds
// whatever was measured, also when it returns an error (interrupted).
func (r *runner) runAll(ctx context.Context) (*Report, error) {
	r.rep = &Report{
		Date:        time.Now().UTC(),
		Command:     "make bench-compare",
		Flags:       r.o.flagsText,
		DurationSec: r.o.duration.Seconds(),
		Grants:      r.o.grants,
		NodeProcs:   r.o.nodeProcs,
		KeysE:       r.o.keysE,
		Systems:     r.o.systems,
		Limit:       fmt.Sprintf("%d per %s, burst %d (token bucket)", limitN, fmtPeriod(limitPeriod), limitBurst),
	}
	if r.want("redis") {
		r.startRedis(ctx)
	}
	r.rep.Machine = machineInfo(r.redisBin)
	var loadScenarios []scenario
	for _, sc := range scenarios {
		if r.o.only[sc.ID] {
			loadScenarios = append(loadScenarios, sc)
		}
	}
	if len(loadScenarios) > 0 {
		if r.want("sluice") {
			r.startSluiceCluster(ctx)
		}
		if r.want("echo") {
			r.startEcho(ctx)
		}
		for _, sc := range loadScenarios {
			r.rep.Scenarios = append(r.rep.Scenarios, ScenarioInfo{ID: sc.ID, Title: sc.Title, Short: sc.Short, Workers: sc.Workers, Keys: sc.Keys, Rate: sc.Rate})
			for _, sys := range r.o.systems {
				if err := ctx.Err(); err != nil {
					r.rep.Interrupted = true
					return r.rep, err
				}
				res := r.runLoad(ctx, sc, sys)
				r.rep.Results = append(r.rep.Results, res)
				fmt.Fprintln(r.stdout, resultLine(res))
				if err := r.writeJSON(r.rep); err != nil {
					r.logf("%v", err)
				}
			}
		}
	}
	// Scenario e alone: the cluster and the echo are no longer needed.
	var wg sync.WaitGroup
	for _, n := range r.sluice {
		wg.Go(func() { n.stop(5 * time.Second) })
	}
	if r.echo != nil {
		wg.Go(func() { r.echo.stop(5 * time.Second) })
	}
	wg.Wait()
	if r.o.only["e"] {
		for _, sys := range r.o.systems {
			if sys == "echo" {
				continue
			}
			if err := ctx.Err(); err != nil {
				r.rep.Interrupted = true
				return r.rep, err
			}
			m := r.runMemory(ctx, sys)
			r.rep.Memory = append(r.rep.Memory, m)
			fmt.Fprintln(r.stdout, memLine(m))
			if err := r.writeJSON(r.rep); err != nil {
				r.logf("%v", err)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		r.rep.Interrupted = true
		return r.rep, err
	}
	return r.rep, nil
}

func (r *runner) want(sys string) bool { return contains(r.o.systems, sys) }

func (r *runner) startSluiceCluster(ctx context.Context) {
	r.logf("starting a 3-node Sluice cluster (%s)", r.o.sluiceBin)
	nodes, err := startSluice(ctx, r.cs, r.o.sluiceBin, 3, "sluice-", r.o.nodeEnv())
	if err != nil {
		r.sluiceErr = err
		r.logf("sluice: %v", err)
		return
	}
	r.sluice = nodes
}

func (r *runner) startRedis(ctx context.Context) {
	bin, err := ensureRedis(ctx)
	if err != nil {
		r.redisErr = err
		r.logf("redis: %v", err)
		return
	}
	r.redisBin = bin
	ports, err := freePorts(1)
	if err != nil {
		r.redisErr = err
		return
	}
	r.redisAddr = loopback(ports[0])
	r.logf("starting redis-server on %s", r.redisAddr)
	c, err := r.cs.start("redis", bin, "--save", "", "--appendonly", "no", "--port", strconv.Itoa(ports[0]),
		"--bind", "127.0.0.1", "--dir", r.cs.dir)
	if err == nil {
		err = waitTCP(ctx, c, r.redisAddr, 15*time.Second)
	}
	if err != nil {
		r.redisErr = err
		r.logf("redis: %v", err)
		return
	}
	r.redis = c
}

func (r *runner) startEcho(ctx context.Context) {
	exe, err := os.Executable()
	if err != nil {
		r.echoErr = err
		return
	}
	ports, err := freePorts(1)
	if err != nil {
		r.echoErr = err
		return
	}
	r.echoAddr = loopback(ports[0])
	r.logf("starting the gRPC echo on %s", r.echoAddr)
	c, err := r.cs.start("echo", exe, "echo-server", "--addr", r.echoAddr)
	if err == nil {
		err = waitTCP(ctx, c, r.echoAddr, 15*time.Second)
	}
	if err != nil {
		r.echoErr = err
		r.logf("echo: %v", err)
		return
	}
	r.echo = c
}

// servers returns the system's server processes, or why there are none.
func (r *runner) servers(sys string) ([]*child, error) {
	switch sys {
	case "sluice":
		if r.sluiceErr != nil {
			return nil, r.sluiceErr
		}
		var cs []*child
		for _, n := range r.sluice {
			cs = append(cs, n.child)
		}
		return cs, nil
	case "redis":
		if r.redisErr != nil {
			return nil, r.redisErr
		}
		return []*child{r.redis}, nil
	case "echo":
		if r.echoErr != nil {
			return nil, r.echoErr
		}
		return []*child{r.echo}, nil
	}
	return nil, fmt.Errorf("unknown system %q", sys)
}

// newTarget builds a fresh Target for one run.
func (r *runner) newTarget(ctx context.Context, sc scenario, sys string) (bench.Target, error) {
	switch sys {
	case "sluice":
		addrs := make([]string, len(r.sluice))
		for i, n := range r.sluice {
			addrs[i] = n.grpc
		}
		return bench.NewSluiceTarget(addrs, limitN, limitBurst, limitPeriod, r.o.grantsIn(sc.ID))
	case "redis":
		t, err := newRedisTarget(ctx, r.redisAddr, sc.Workers, limitN, limitBurst, limitPeriod)
		if err != nil {
			return nil, err
		}
		if err := t.flushAll(ctx); err != nil {
			t.Close()
			return nil, fmt.Errorf("redis: flushall: %w", err)
		}
		return t, nil
	case "echo":
		return newEchoTarget(r.echoAddr, limitN, limitBurst, limitPeriod)
	}
	return nil, fmt.Errorf("unknown system %q", sys)
}

// progress is where the engine's live progress line goes: the terminal, or
// nowhere.
func (r *runner) progress() io.Writer {
	if f, ok := r.stderr.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			return f
		}
	}
	return nil
}

// runLoad runs one scenario against one system and measures the CPU of the
// system's servers and of this process around it.
func (r *runner) runLoad(ctx context.Context, sc scenario, sys string) Result {
	res := Result{Scenario: sc.ID, System: sys, Workers: sc.Workers, Keys: sc.Keys, Rate: sc.Rate,
		DurationSec: r.o.duration.Seconds()}
	if sys == "sluice" {
		res.Grants = r.o.grantsIn(sc.ID)
	}
	procs, err := r.servers(sys)
	if err != nil {
		res.Error = "not started: " + err.Error()
		return res
	}
	r.logf("(%s) %s: %s", sc.ID, systemName(sys), sc.Title)
	t, err := r.newTarget(ctx, sc, sys)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	cfg := bench.Config{
		Workers: sc.Workers, Keys: sc.Keys, Hot: sc.Hot, KeyPrefix: sc.ID + ":",
		Limit: limitN, Period: limitPeriod, Burst: limitBurst,
		Duration: r.o.duration, Rate: sc.Rate, Batch: 1,
		Progress: r.progress(), Timeout: callTimeout,
	}
	srv0, err0 := serversCPU(procs)
	self0 := selfCPU()
	sum, err := bench.Run(ctx, cfg, t)
	self1 := selfCPU()
	srv1, err1 := serversCPU(procs)
	if cerr := t.Close(); cerr != nil && err == nil {
		err = cerr
	}
	if sum.Checks > 0 || err == nil {
		res.Summary = &sum
	}
	if err != nil {
		res.Error = err.Error()
	}
	if cerr := errors.Join(err0, err1); cerr != nil {
		res.Error = strings.TrimPrefix(res.Error+"; cpu: "+cerr.Error(), "; ")
	} else {
		res.CPUServerSec = (srv1 - srv0).Seconds()
		res.CPUClientSec = (self1 - self0).Seconds()
		if sum.Checks > 0 {
			res.CPUPerMillion = (res.CPUServerSec + res.CPUClientSec) / (float64(sum.Checks) / 1e6)
		}
	}
	for _, c := range procs {
		if done, werr := c.exited(); done {
			res.Error = strings.TrimPrefix(fmt.Sprintf("%s; %s exited during the run (%v): %s", res.Error, c.name, werr, c.logTail()), "; ")
		}
	}
	return res
}

// serversCPU sums the CPU time of the processes.
func serversCPU(procs []*child) (time.Duration, error) {
	var sum time.Duration
	for _, c := range procs {
		d, err := procCPU(c.pid())
		if err != nil {
			return 0, err
		}
		sum += d
	}
	return sum, nil
}

// runMemory is scenario e for one system: fill one server with r.o.keysE
// distinct keys and read its memory.
func (r *runner) runMemory(ctx context.Context, sys string) MemResult {
	m := MemResult{System: sys, Keys: r.o.keysE}
	r.logf("(e) %s: filling %s distinct keys", memSystemName(sys), fmtInt(r.o.keysE))
	var err error
	switch sys {
	case "sluice":
		err = r.memSluice(ctx, &m)
	case "redis":
		err = r.memRedis(ctx, &m)
	default:
		err = fmt.Errorf("unknown system %q", sys)
	}
	if err != nil {
		m.Error = err.Error()
	}
	return m
}

// memKey is the i-th key of scenario e.
func memKey(i int64) string { return "k:" + strconv.FormatInt(i, 10) }

// fill calls batch(lo, hi) for [0, n) in chunks of memBatch from memFillers
// goroutines, and returns the first error.
func fill(ctx context.Context, n int64, batch func(ctx context.Context, lo, hi int64) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range memFillers {
		wg.Go(func() {
			for ctx.Err() == nil {
				lo := next.Add(memBatch) - memBatch
				if lo >= n {
					return
				}
				if err := batch(ctx, lo, min(lo+memBatch, n)); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

func (r *runner) memSluice(ctx context.Context, m *MemResult) error {
	nodes, err := startSluice(ctx, r.cs, r.o.sluiceBin, 1, "sluice-e-", r.o.nodeEnv())
	if err != nil {
		return err
	}
	nd := nodes[0]
	defer nd.stop(5 * time.Second)
	if m.RSSBefore, err = procRSS(nd.pid()); err != nil {
		return err
	}
	cl, err := client.New(client.Config{Addrs: []string{nd.grpc}, Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	defer cl.Close()
	lim := client.Limit{Limit: limitN, Burst: limitBurst, Period: memPeriod}
	var itemErrs atomic.Int64
	var firstItemErr atomic.Value
	start := time.Now()
	err = fill(ctx, m.Keys, func(ctx context.Context, lo, hi int64) error {
		items := make([]client.Item, 0, hi-lo)
		for i := lo; i < hi; i++ {
			items = append(items, client.Item{Key: memKey(i), Limit: lim})
		}
		res, err := cl.Check(ctx, items...)
		if err != nil {
			return err
		}
		for _, x := range res {
			if x.Err != nil {
				itemErrs.Add(1)
				firstItemErr.CompareAndSwap(nil, x.Err.Error())
			}
		}
		return nil
	})
	m.FillSec = time.Since(start).Seconds()
	if err != nil {
		return err
	}
	m.Filled = m.Keys - itemErrs.Load()
	if m.RSS, err = procRSS(nd.pid()); err != nil {
		return err
	}
	if n := itemErrs.Load(); n > 0 {
		return fmt.Errorf("%d keys not stored, first: %v", n, firstItemErr.Load())
	}
	return nil
}

func (r *runner) memRedis(ctx context.Context, m *MemResult) error {
	if r.redisErr != nil {
		return fmt.Errorf("not started: %w", r.redisErr)
	}
	t, err := newRedisTarget(ctx, r.redisAddr, 2*memFillers, limitN, limitBurst, memPeriod)
	if err != nil {
		return err
	}
	defer t.Close()
	if err := t.flushAll(ctx); err != nil {
		return err
	}
	// Give the memory back whatever happens: the server stays up until exit.
	defer func() { _ = t.flushAll(context.WithoutCancel(ctx)) }()
	if m.RSSBefore, err = procRSS(r.redis.pid()); err != nil {
		return err
	}
	var denied atomic.Int64
	start := time.Now()
	err = fill(ctx, m.Keys, func(ctx context.Context, lo, hi int64) error {
		keys := make([]string, 0, hi-lo)
		for i := lo; i < hi; i++ {
			keys = append(keys, memKey(i))
		}
		allowed := make([]bool, len(keys))
		if err := t.Check(ctx, keys, allowed); err != nil {
			return err
		}
		for _, a := range allowed {
			if !a {
				denied.Add(1)
			}
		}
		return nil
	})
	m.FillSec = time.Since(start).Seconds()
	if err != nil {
		return err
	}
	n, err := t.dbSize(ctx)
	if err != nil {
		return err
	}
	m.Filled = n
	if m.RSS, err = procRSS(r.redis.pid()); err != nil {
		return err
	}
	if m.UsedMemory, err = t.usedMemory(ctx); err != nil {
		return err
	}
	if n != m.Keys || denied.Load() > 0 {
		return fmt.Errorf("DBSIZE %d of %d keys, %d denied", n, m.Keys, denied.Load())
	}
	return nil
}

// machineInfo describes this machine for the report.
func machineInfo(redisBin string) Machine {
	mc := Machine{NProc: runtime.NumCPU(), GoVersion: runtime.Version(), OSArch: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				mc.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				f := strings.Fields(v)
				if len(f) > 0 {
					kb, _ := strconv.ParseInt(f[0], 10, 64)
					mc.MemBytes = kb * 1024
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			mc.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	if redisBin != "" {
		mc.Redis = commandOutput(redisBin, "--version")
	}
	mc.Git = commandOutput("git", "describe", "--tags", "--always", "--dirty")
	return mc
}

// writeJSON writes the report so far.
func (r *runner) writeJSON(rep *Report) error {
	if r.o.jsonOut == "" || rep == nil {
		return nil
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(r.o.jsonOut, b)
}

// writeOutputs writes the markdown section, the headline and the plot.
func (r *runner) writeOutputs(rep *Report) error {
	targets := evaluateTargets(rep)
	fmt.Fprintln(r.stdout)
	for _, t := range targets {
		fmt.Fprintf(r.stdout, "target (%s) %s: %s: %s\n", t.Scenario, t.Name, t.Status, t.Measured)
	}
	var errs []error
	svgLink := ""
	if r.o.svg != "" && len(rep.Results) > 0 {
		if err := writeLatencySVG(r.o.svg, rep); err != nil {
			errs = append(errs, fmt.Errorf("svg: %w", err))
		} else {
			svgLink = r.o.svg
			if r.o.out != "" {
				if rel, err := filepath.Rel(filepath.Dir(r.o.out), r.o.svg); err == nil {
					svgLink = filepath.ToSlash(rel)
				}
			}
			r.logf("wrote %s", r.o.svg)
		}
	}
	if r.o.headline != "" {
		if err := writeFile(r.o.headline, []byte(renderHeadline(rep))); err != nil {
			errs = append(errs, err)
		} else {
			r.logf("wrote %s", r.o.headline)
		}
	}
	if r.o.out != "" {
		section := renderSection(rep, targets, svgLink)
		doc, err := os.ReadFile(r.o.out)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		} else if err := writeFile(r.o.out, []byte(replaceSection(string(doc), section))); err != nil {
			errs = append(errs, err)
		} else {
			r.logf("wrote the bench-compare section of %s", r.o.out)
		}
	}
	if r.o.jsonOut != "" {
		r.logf("wrote %s", r.o.jsonOut)
	}
	return errors.Join(errs...)
}

// writeFile writes b to path through a temp file and a rename, making the
// directory if needed.
func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
