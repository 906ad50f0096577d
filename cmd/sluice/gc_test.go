package main

import (
	"bufio"
	"context"
	"flag"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/node"
)

// --gc-percent takes a whole percent in 1..100000, from the command line
// or SLUICE_GC_PERCENT; anything else is an error naming the flag or the
// variable.
func TestGCPercentFlag(t *testing.T) {
	parse := func(args []string, env string) (int, error) {
		v := 7
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Var(gcPercentFlag{&v}, "gc-percent", "")
		t.Setenv("SLUICE_GC_PERCENT", env)
		if env == "" {
			os.Unsetenv("SLUICE_GC_PERCENT")
		}
		err := parseWithEnv(fs, args)
		return v, err
	}
	for _, tc := range []struct {
		args []string
		env  string
		want int
	}{
		{[]string{"--gc-percent", "25"}, "", 25},
		{[]string{"--gc-percent=1"}, "", 1},
		{[]string{"--gc-percent=400"}, "", 400},
		{nil, "50", 50},
		{[]string{"--gc-percent=30"}, "50", 30}, // the flag wins
		{nil, "", 7},
	} {
		got, err := parse(tc.args, tc.env)
		if err != nil || got != tc.want {
			t.Errorf("%v env %q: %d, %v; want %d", tc.args, tc.env, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		env  string
		name string
	}{
		{[]string{"--gc-percent=0"}, "", "gc-percent"},
		{[]string{"--gc-percent=-1"}, "", "gc-percent"},
		{[]string{"--gc-percent=off"}, "", "gc-percent"},
		{[]string{"--gc-percent=25%"}, "", "gc-percent"},
		{[]string{"--gc-percent=2.5"}, "", "gc-percent"},
		{[]string{"--gc-percent=100001"}, "", "gc-percent"},
		{[]string{"--gc-percent="}, "", "gc-percent"},
		{nil, "lots", "SLUICE_GC_PERCENT"},
	} {
		if _, err := parse(tc.args, tc.env); err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%v env %q: %v, want an error naming %s", tc.args, tc.env, err, tc.name)
		}
	}
}

// `sluice serve` refuses a bad --gc-percent or --memory-limit before it
// starts, naming the flag.
func TestServeBadGCFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		name string
	}{
		{[]string{"--gc-percent", "0"}, "gc-percent"},
		{[]string{"--gc-percent", "ten"}, "gc-percent"},
		{[]string{"--memory-limit", "-1"}, "memory-limit"},
		{[]string{"--memory-limit", "lots"}, "memory-limit"},
		{[]string{"--max-lease-ttl", "25h"}, "max-lease-ttl"},
		{[]string{"--max-lease-ttl", "-1s"}, "max-lease-ttl"},
		{[]string{"--max-lease-ttl", "soon"}, "max-lease-ttl"},
		{[]string{"--max-keys-per-client", "-1"}, "max-keys-per-client"},
		{[]string{"--max-keys-per-client", "many"}, "max-keys-per-client"},
		{[]string{"--max-keys-per-client", "1.5"}, "max-keys-per-client"},
		{[]string{"--max-keys-per-client", "99999999999999999999"}, "max-keys-per-client"},
	} {
		err := runServe(context.Background(), serveArgs(tc.args...)[1:], io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("serve %v: %v, want an error naming --%s", tc.args, err, tc.name)
		}
	}
}

// fakeHost is a MemorySource with a cgroup v2 limit (none if 0) and 24 GiB
// of physical memory.
func fakeHost(cgroup int64) node.MemorySource {
	return node.MemorySource{
		ReadFile: func(name string) ([]byte, error) {
			if cgroup > 0 && name == "/sys/fs/cgroup/memory.max" {
				return []byte(strconv.FormatInt(cgroup, 10) + "\n"), nil
			}
			return nil, fs.ErrNotExist
		},
		GoMemLimit: func() int64 { return math.MaxInt64 },
		Physical:   func() int64 { return 24 << 30 },
	}
}

// Without flags: GOGC and GOMEMLIMIT from the environment stay in force;
// else the GC percent is defaultGCPercent and the memory limit 90% of the
// container's (none outside one).
func TestDefaultGCSettings(t *testing.T) {
	env := func(kv ...string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1], true
				}
			}
			return "", false
		}
	}
	for _, tc := range []struct {
		name   string
		env    func(string) (string, bool)
		cgroup int64
		want   gcSettings
	}{
		{"nothing set, no container", env(), 0,
			gcSettings{defaultGCPercent, "default", 0, "no container limit"}},
		{"nothing set, 2GiB container", env(), 2 << 30,
			gcSettings{defaultGCPercent, "default", 1843 << 20, "90% of the cgroup v2 memory.max"}},
		{"GOGC set", env("GOGC", "80"), 0,
			gcSettings{0, "GOGC=80", 0, "no container limit"}},
		{"GOGC=off", env("GOGC", "off"), 0,
			gcSettings{0, "GOGC=off", 0, "no container limit"}},
		{"GOMEMLIMIT set, in a container", env("GOMEMLIMIT", "900MiB"), 2 << 30,
			gcSettings{defaultGCPercent, "default", -1, "GOMEMLIMIT=900MiB"}},
		{"both set", env("GOGC", "50", "GOMEMLIMIT", "1GiB"), 2 << 30,
			gcSettings{0, "GOGC=50", -1, "GOMEMLIMIT=1GiB"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := defaultGCSettings(tc.env, fakeHost(tc.cgroup)); got != tc.want {
				t.Errorf("defaultGCSettings = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The memory limit is set unless GOMEMLIMIT stays; 0 is none.
func TestApplyMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		limit int64
		want  []int64
	}{
		{-1, nil},
		{0, []int64{math.MaxInt64}},
		{1 << 30, []int64{1 << 30}},
	} {
		var got []int64
		gcSettings{MemoryLimit: tc.limit}.applyMemoryLimit(func(v int64) int64 { got = append(got, v); return 0 })
		if len(got) != len(tc.want) || (len(got) == 1 && got[0] != tc.want[0]) {
			t.Errorf("MemoryLimit %d: set %v, want %v", tc.limit, got, tc.want)
		}
	}
}

// The GC percent is the target's for a large heap, lets a small one grow
// by gcMinHeadroom, and is never above 100 on that account.
func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		target int
		live   uint64
		want   int
	}{
		{25, 0, 100},           // no collection yet
		{25, 4 * mib, 100},     // a small heap: Go's default
		{25, 64 * mib, 100},    // 64 MiB of headroom is 100%
		{25, 128 * mib, 50},    // 64 MiB of headroom
		{25, 200 * mib, 32},    // 64 MiB (rounded up)
		{25, 256 * mib, 25},    // the target's share is 64 MiB
		{25, 1024 * mib, 25},   // the target
		{50, 100 * mib, 64},    // 64 MiB
		{50, 1024 * mib, 50},   // the target
		{1, 64 << 30, 1},       // the target
		{100, 1024 * mib, 100}, // 100 or more is used as is
		{300, 4 * mib, 300},
	} {
		if got := gcPercentFor(tc.target, tc.live); got != tc.want {
			t.Errorf("gcPercentFor(%d, %d MiB) = %d, want %d", tc.target, tc.live/mib, got, tc.want)
		}
	}
}

// tuneGC follows the live heap: it sets the percent at once, again only
// when it changes, and stops with its context.
func TestTuneGC(t *testing.T) {
	var mu sync.Mutex
	live := uint64(1 << 20)
	var set []int
	read := func() uint64 { mu.Lock(); defer mu.Unlock(); return live }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		tuneGC(ctx, 25, time.Millisecond, read, func(p int) int { mu.Lock(); defer mu.Unlock(); set = append(set, p); return 0 })
		close(done)
	}()
	waitFor := func(want []int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			mu.Lock()
			got := append([]int(nil), set...)
			mu.Unlock()
			if slices.Equal(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("set %v, want %v", got, want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitFor([]int{100})
	mu.Lock()
	live = 1 << 30
	mu.Unlock()
	waitFor([]int{100, 25})
	time.Sleep(20 * time.Millisecond) // more ticks, the same percent
	waitFor([]int{100, 25})
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("tuneGC still running after its context ended")
	}
}

// gauge reads a metric of a server's /metrics.
func gauge(t *testing.T, s *server, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + s.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return 0
}

// A served process runs with the settings: --gc-percent of 100 or more
// and --memory-limit as given; GOGC and GOMEMLIMIT untouched without
// flags; a small heap at Go's default of 100 under the default percent.
func TestServeGCSettings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     []string
		args    []string
		percent float64
		limit   float64
	}{
		{"defaults", nil, nil, 100, -1},
		{"flags", nil, []string{"--gc-percent", "150", "--memory-limit", "1GiB"}, 150, 1 << 30},
		{"environment", []string{"GOGC", "40", "GOMEMLIMIT", "768MiB"}, nil, 40, 768 << 20},
		{"flags win", []string{"GOGC", "40", "GOMEMLIMIT", "768MiB"}, []string{"--gc-percent", "120", "--memory-limit", "0"}, 120, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"GOGC", "GOMEMLIMIT"} {
				t.Setenv(k, "") // restored after the test
				os.Unsetenv(k)
			}
			for i := 0; i+1 < len(tc.env); i += 2 {
				t.Setenv(tc.env[i], tc.env[i+1])
			}
			s := startServer(t, tc.args...)
			deadline := time.Now().Add(5 * time.Second)
			for gauge(t, s, "go_gc_gogc_percent") != tc.percent {
				if time.Now().After(deadline) {
					t.Fatalf("go_gc_gogc_percent = %v, want %v", gauge(t, s, "go_gc_gogc_percent"), tc.percent)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if tc.limit >= 0 {
				if got := gauge(t, s, "go_gc_gomemlimit_bytes"); got != tc.limit {
					t.Errorf("go_gc_gomemlimit_bytes = %v, want %v", got, tc.limit)
				}
			}
		})
	}
}
