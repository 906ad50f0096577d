package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// runner holds the servers and the results of one run.
type runner struct {
	o              *options
	stdout, stderr io.Writer
	cs             *children

	sluice    []*sluiceNode
	sluiceErr error
	// sluice1 is the 1-node Sluice of the RLS scenarios.
	sluice1    *sluiceNode
	sluice1Err error
	redis      *child
	redisAddr  string
	redisErr   error
	redisBin   string
	echo       *child
	echoAddr   string
	echoErr    error
	// gub is Gubernator's 3 instances, for a-d.
	gub    []*gubNode
	gubErr error
	// ref is envoyproxy/ratelimit (with redis as its store), for f and g.
	ref     *child
	refAddr string
	refErr  error

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
	var loadScenarios []scenario
	rls, other := false, false
	for _, sc := range scenarios {
		if r.o.only[sc.ID] {
			loadScenarios = append(loadScenarios, sc)
			rls = rls || sc.RLS
			other = other || !sc.RLS
		}
	}
	var curve []scenario
	if r.o.only["h"] {
		for _, w := range curveCallers {
			curve = append(curve, curvePoint(w, r.o.curveDuration))
		}
		other = true
	}
	if r.want("redis") || (rls && r.want("ratelimit")) {
		r.startRedis(ctx)
	}
	r.rep.Machine = machineInfo(r.redisBin)
	if rls && r.want("ratelimit") {
		r.rep.Machine.Ratelimit = referenceVersion(r.o.ratelimitBin)
		r.rep.RLSConfig = rlsConfigYAML()
	}
	if other && r.want("gubernator") {
		r.rep.Machine.Gubernator = gubernatorVersion(r.o.gubernatorBin)
	}
	if len(loadScenarios) > 0 || len(curve) > 0 {
		if r.want("sluice") || r.want("sluice-nogrants") || (rls && r.want("sluice-owner")) {
			r.startSluiceCluster(ctx, rls)
		}
		if rls && r.want("sluice1") {
			r.startSluiceOne(ctx)
		}
		if other && r.want("gubernator") {
			r.startGubernator(ctx)
		}
		if r.want("echo") {
			r.startEcho(ctx)
		}
		if rls && r.want("ratelimit") {
			r.startReference(ctx)
		}
		for i, sc := range append(loadScenarios, curve...) {
			if i < len(loadScenarios) {
				r.rep.Scenarios = append(r.rep.Scenarios, ScenarioInfo{ID: sc.ID, Title: sc.Title, Short: sc.Short, Workers: sc.Workers, Keys: sc.Keys, Rate: sc.Rate, RLS: sc.RLS})
			} else {
				r.rep.Curve = append(r.rep.Curve, sc.Workers)
			}
			for _, sys := range r.o.systems {
				if !sc.runs(sys) || (sys == "sluice-nogrants" && !r.o.grantsIn(sc.grantsID())) {
					continue
				}
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
		wg.Go(func() { n.Stop(5 * time.Second) })
	}
	if r.sluice1 != nil {
		wg.Go(func() { r.sluice1.Stop(5 * time.Second) })
	}
	if r.echo != nil {
		wg.Go(func() { r.echo.Stop(5 * time.Second) })
	}
	if r.ref != nil {
		wg.Go(func() { r.ref.Stop(5 * time.Second) })
	}
	for _, n := range r.gub {
		wg.Go(func() { n.child.Stop(5 * time.Second) })
	}
	wg.Wait()
	if r.o.only["e"] {
		for _, sys := range r.o.systems {
			if !remembers(sys) {
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
