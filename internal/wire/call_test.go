package wire

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var errTest = errors.New("wire: test")

// answered returns what c's done channel holds, if anything.
func answered(c *Call[int, int]) (error, bool) {
	select {
	case err := <-c.done:
		return err, true
	default:
		return nil, false
	}
}

func TestCallIsAnsweredOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		// steps, in order: 'c' Claim wins, 'C' Claim loses, 'a' Answer(nil),
		// 'f' Fail(errTest), 'x' the caller abandons the call
		steps    string
		answered bool
		want     error
	}{
		{"claim once", "cCa", true, nil},
		{"fail", "f", true, errTest},
		{"fail twice", "fCf", true, errTest},
		{"fail after the answer", "caf", true, nil},
		{"abandoned", "xCf", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p Pool[int, int]
			c := p.Get()
			for k, step := range tc.steps {
				switch step {
				case 'c', 'C':
					if got := c.Claim(); got != (step == 'c') {
						t.Fatalf("step %d: Claim %v, want %v", k, got, step == 'c')
					}
				case 'a':
					c.Answer(nil)
				case 'f':
					c.Fail(errTest)
				case 'x':
					if !c.abandon() {
						t.Fatalf("step %d: abandon of a queued call failed", k)
					}
				}
			}
			err, ok := answered(c)
			if ok != tc.answered || err != tc.want {
				t.Fatalf("answered %v with %v, want answered %v with %v", ok, err, tc.answered, tc.want)
			}
			if _, again := answered(c); again {
				t.Fatal("answered twice")
			}
		})
	}
}

// Many answerers race for one call: exactly one claims it.
func TestCallClaimRace(t *testing.T) {
	var p Pool[int, int]
	for range 100 {
		c := p.Get()
		var wins atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if c.Claim() {
					wins.Add(1)
					c.Answer(nil)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d claims won, want 1", wins.Load())
		}
		<-c.done
		p.Put(c)
	}
}

func TestWait(t *testing.T) {
	for _, tc := range []struct {
		name string
		// by call: 'a' answered (nil), 'f' failed, 'q' still queued
		calls    string
		cancel   bool
		wantErr  error
		wantEach []int // the indexes passed to each, in order
		// by call: 'A' abandoned, '-' not, '?' either
		abandoned string
	}{
		{name: "all answered", calls: "aaf", wantEach: []int{0, 1, 2}, abandoned: "---"},
		{name: "ctx ends first", calls: "aqq", cancel: true, wantErr: context.Canceled, abandoned: "?AA"},
		{name: "ctx ended, none answered", calls: "qq", cancel: true, wantErr: context.Canceled, abandoned: "AA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p Pool[int, int]
			calls := make([]*Call[int, int], len(tc.calls))
			for i := range calls {
				calls[i] = p.Get()
				switch tc.calls[i] {
				case 'a':
					calls[i].Fail(nil)
				case 'f':
					calls[i].Fail(errTest)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				cancel()
			}
			var each []int
			var errs []error
			err := Wait(ctx, calls, func(i int, err error) {
				each = append(each, i)
				errs = append(errs, err)
			})
			if err != tc.wantErr {
				t.Fatalf("Wait: %v, want %v", err, tc.wantErr)
			}
			if !tc.cancel && !slices.Equal(each, tc.wantEach) {
				t.Fatalf("each got %v, want %v", each, tc.wantEach)
			}
			for k, i := range each {
				var want error
				if tc.calls[i] == 'f' {
					want = errTest
				}
				if errs[k] != want {
					t.Errorf("call %d: %v, want %v", i, errs[k], want)
				}
			}
			for i, c := range calls {
				switch tc.abandoned[i] {
				case 'A':
					if !c.Abandoned() {
						t.Errorf("call %d not abandoned", i)
					}
				case '-':
					if c.Abandoned() {
						t.Errorf("call %d abandoned", i)
					}
				}
				if len(c.done) != 0 {
					t.Errorf("call %d: an answer left in done", i)
				}
			}
		})
	}
}

// A call claimed when its caller's ctx ends is being answered: Wait waits
// for that answer, so the call can be reused.
func TestWaitAbandonWaitsForClaimed(t *testing.T) {
	var p Pool[int, int]
	c := p.Get()
	if !c.Claim() {
		t.Fatal("Claim lost")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	answer := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		<-answer
		c.Answer(nil)
	})
	done := make(chan error, 1)
	go func() { done <- Wait(ctx, []*Call[int, int]{c}, nil) }()
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v before the claimed call was answered", err)
	default:
	}
	close(answer)
	wg.Wait()
	select {
	case err := <-done:
		if err != nil && err != context.Canceled {
			t.Fatalf("Wait: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after the answer")
	}
	if c.Abandoned() || len(c.done) != 0 {
		t.Fatalf("abandoned %v, %d answers left: the call is not reusable", c.Abandoned(), len(c.done))
	}
}

func TestPoolPut(t *testing.T) {
	var p Pool[int, int]
	kept, left := p.Get(), p.Get()
	for _, c := range []*Call[int, int]{kept, left} {
		c.In, c.Out, c.Deadline = []int{1}, []int{0}, time.Now()
	}
	kept.Fail(nil)
	<-kept.done
	left.abandon()
	p.Put(kept, left)
	if kept.In != nil || kept.Out != nil || !kept.Deadline.IsZero() {
		t.Error("a recycled call keeps its caller's slices or deadline")
	}
	if left.In == nil {
		t.Error("an abandoned call was recycled: whoever holds it may still read it")
	}
	if c := p.Get(); c.Abandoned() || !c.Claim() {
		t.Error("Get returned a call that does not wait")
	}
}

func TestLiveAndFailAll(t *testing.T) {
	var p Pool[int, int]
	calls := make([]*Call[int, int], 4)
	for i := range calls {
		calls[i] = p.Get()
		calls[i].In = make([]int, i+1)
	}
	calls[1].abandon()
	if !calls[2].Claim() {
		t.Fatal("Claim lost")
	}
	live, n := Live(append([]*Call[int, int](nil), calls...))
	if len(live) != 3 || live[0] != calls[0] || live[1] != calls[2] || live[2] != calls[3] || n != 1+3+4 {
		t.Fatalf("Live: %d calls, %d items; want calls 0, 2, 3 and 8 items", len(live), n)
	}
	FailAll(calls, errTest)
	for i, want := range []bool{true, false, false, true} {
		err, ok := answered(calls[i])
		if ok != want || (ok && err != errTest) {
			t.Errorf("call %d: answered %v with %v, want answered %v", i, ok, err, want)
		}
	}
	calls[2].Answer(nil)
}
