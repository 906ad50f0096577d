package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/internal/bench"
)

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
	duration := r.o.duration
	if sc.Duration > 0 {
		duration = sc.Duration
	}
	res := Result{Scenario: sc.ID, System: sys, Workers: sc.Workers, Keys: sc.Keys, Rate: sc.Rate,
		DurationSec: duration.Seconds()}
	if sys == "sluice" && !sc.RLS {
		res.Grants = r.o.grantsIn(sc.grantsID())
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
		Duration: duration, Rate: sc.Rate, Batch: 1,
		Progress: r.progress(), Timeout: callTimeout,
	}
	if sc.RLS {
		cfg.Burst = bench.RLSAuditBurst(limitN) // fixed windows: see rls.go
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
		if done, werr := c.Exited(); done {
			res.Error = strings.TrimPrefix(fmt.Sprintf("%s; %s exited during the run (%v): %s", res.Error, c.Name, werr, c.LogTail(8)), "; ")
		}
	}
	return res
}

// serversCPU sums the CPU time of the processes.
func serversCPU(procs []*child) (time.Duration, error) {
	var sum time.Duration
	for _, c := range procs {
		d, err := procCPU(c.Pid())
		if err != nil {
			return 0, err
		}
		sum += d
	}
	return sum, nil
}
