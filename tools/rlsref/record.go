package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"
)

// maxAttempts bounds the runs of one case that straddle a second boundary.
const maxAttempts = 8

// stepMargin is how far after a second boundary a case (or a next_second
// step) starts, so that the steps of one second fit in it.
const stepMargin = 30 * time.Millisecond

// sleepUntil sleeps until t or ctx is done.
func sleepUntil(ctx context.Context, t time.Time) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(t)):
		return nil
	}
}

// caseStart waits for the start of a case: just after a second boundary,
// and not in the last 10 seconds of a minute, so that a case's steps share
// its minute (and hour, day...) windows as they were written to.
func caseStart(ctx context.Context) error {
	now := time.Now().Unix()
	next := now + 1
	if next%60 >= 50 {
		next += 60 - next%60
	}
	return sleepUntil(ctx, time.Unix(next, 0).Add(stepMargin))
}

// stepTiming checks one step's times: sent and received in one second,
// and that second the one the case wants (the step before's, or the next
// with next_second). prev is the second of the step before (0 for the
// first).
func stepTiming(a answer, prev int64, nextSecond bool) error {
	s, r := a.Sent.Unix(), a.Received.Unix()
	switch {
	case s != r:
		return fmt.Errorf("sent at %s, answered at %s: a second boundary fell in between", a.Sent.Format(time.StampMicro), a.Received.Format(time.StampMicro))
	case prev != 0 && nextSecond && s != prev+1:
		return fmt.Errorf("sent in second %d, not the one after %d", s, prev)
	case prev != 0 && !nextSecond && s != prev:
		return fmt.Errorf("sent in second %d, not in %d with the step before", s, prev)
	}
	return nil
}

// runSteps sends the case's steps to c with the case's timing. It returns
// the answers, or the timing error of the first step that missed its
// second (the run must then be repeated on an empty store).
func runSteps(ctx context.Context, tc *testCase, send func(i int) answer) ([]answer, error) {
	if err := caseStart(ctx); err != nil {
		return nil, err
	}
	var answers []answer
	var prev int64
	for i, st := range tc.File.Steps {
		if st.NextSecond && prev != 0 {
			if err := sleepUntil(ctx, time.Unix(prev+1, 0).Add(stepMargin)); err != nil {
				return nil, err
			}
		}
		a := send(i)
		if err := stepTiming(a, prev, st.NextSecond); err != nil {
			return nil, fmt.Errorf("step %d: %w", i, err)
		}
		prev = a.Sent.Unix()
		answers = append(answers, a)
	}
	return answers, nil
}

// recordOptions are record's flags.
type recordOptions struct {
	cases     string
	only      []string
	ratelimit string
}

// record runs every case against the reference and writes its golden.
func record(ctx context.Context, o recordOptions, stderr io.Writer) error {
	cases, dir, redisAddr, done, err := prepare(ctx, o.cases, o.only, "rlsref-")
	if err != nil {
		return err
	}
	defer done()
	version := referenceVersion(o.ratelimit) + ", " + redisServerVersion()
	for _, tc := range cases {
		g, err := recordCase(ctx, dir, o.ratelimit, redisAddr, tc)
		if err != nil {
			return fmt.Errorf("%s: %w", tc.Name, err)
		}
		g.Reference = version
		if err := writeGolden(tc, g); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "rlsref: %-28s %2d steps, %d attempt(s)\n", tc.Name, len(g.Steps), g.Attempts)
	}
	return nil
}

// recordCase runs one case on a fresh reference until its steps keep their
// seconds.
func recordCase(ctx context.Context, dir, bin, redisAddr string, tc *testCase) (*golden, error) {
	ref, err := startReference(ctx, dir, "ratelimit-"+tc.Name, bin, tc.ConfigDir, redisAddr)
	if err != nil {
		return nil, err
	}
	defer ref.Stop(stopGrace)
	c, err := dialRLS(ref.grpc)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := waitRLS(ctx, c, 30*time.Second); err != nil {
		return nil, fmt.Errorf("reference: %w; log: %s", err, ref.LogTail(10))
	}
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		if err := flushAll(redisAddr); err != nil {
			return nil, err
		}
		answers, err := runSteps(ctx, tc, func(i int) answer { return c.call(ctx, tc.Requests[i]) })
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "rlsref: %s: attempt %d: %v; again on an empty Redis\n", tc.Name, attempt, err)
			continue
		}
		g := &golden{Case: tc.Name, Description: tc.File.Description, Semantics: tc.File.Semantics, Attempts: attempt}
		for i, a := range answers {
			gs := goldenStep{Note: tc.File.Steps[i].Note, SentUnixNano: a.Sent.UnixNano(), ReceivedUnixNano: a.Received.UnixNano(), Error: a.Error}
			if gs.Request, err = protoJSON(tc.Requests[i]); err != nil {
				return nil, err
			}
			if a.Response != nil {
				if gs.Response, err = protoJSON(a.Response); err != nil {
					return nil, err
				}
			}
			g.Steps = append(g.Steps, gs)
		}
		return g, nil
	}
	return nil, fmt.Errorf("no run of %d kept every step in its second", maxAttempts)
}
