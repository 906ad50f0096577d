package wire

import (
	"sync"
	"time"
)

// flow is the work of one connection on its listener's pool: at most
// share of its messages are decided at once (runnable goroutines), the
// rest wait in its own FIFO, not in the Go scheduler's run queue in front
// of the other connections' messages. A connection that floods the node
// thus competes for the CPU with share goroutines, however many messages
// it has in flight, and another connection's message waits behind at most
// share of the flooder's, not behind its whole budget.
//
// A message that waits (on another node, a key mid-handoff) rather than
// computes must not hold up its connection's queue for good, nor deadlock
// a cycle of nodes forwarding to each other: when none of a flow's running
// messages has finished for stall while messages are queued, the running
// ones stop counting (a new epoch) and up to share more start.
type flow struct {
	pool  *Workers
	share int
	stall time.Duration

	mu      sync.Mutex
	q       []task // queued, oldest first, from head
	head    int
	running int    // running messages of this epoch
	epoch   uint64 // grows at each stall release
	done    uint64 // messages finished, for the stall check
	armed   bool   // the stall timer is set
	timer   *time.Timer
	seen    uint64    // done when the timer was armed
	runs    sync.Pool // of *flowRun
}

// flowRun is a worker's run of a flow (see start), pooled.
type flowRun struct {
	f     *flow
	first task
	ep    uint64
}

func (r *flowRun) run() {
	f, t, ep := r.f, r.first, r.ep
	*r = flowRun{}
	f.runs.Put(r)
	for t != nil {
		t.run()
		t = f.next(ep)
	}
}

func newFlow(pool *Workers, share int, stall time.Duration) *flow {
	return &flow{pool: pool, share: share, stall: stall}
}

// submit runs t now if the flow is below its share, else queues it.
func (f *flow) submit(t task) {
	f.mu.Lock()
	if f.running < f.share {
		f.running++
		ep := f.epoch
		f.mu.Unlock()
		f.start(t, ep)
		return
	}
	f.q = append(f.q, t)
	if !f.armed {
		f.arm()
	}
	f.mu.Unlock()
}

// start runs t, then the flow's queued messages while its epoch lasts,
// on one worker.
func (f *flow) start(t task, ep uint64) {
	r, _ := f.runs.Get().(*flowRun)
	if r == nil {
		r = new(flowRun)
	}
	r.f, r.first, r.ep = f, t, ep
	if !f.pool.goTask(r) {
		go r.run()
	}
}

// next ends a message of epoch ep and returns the next queued one for the
// same worker, or nil when there is none or ep has ended (its place was
// given to others at the stall release).
func (f *flow) next(ep uint64) task {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.done++
	if ep != f.epoch {
		return nil
	}
	if f.head == len(f.q) {
		f.running--
		return nil
	}
	return f.pop()
}

// pop takes the oldest queued message; f.mu is held and one is queued.
func (f *flow) pop() task {
	t := f.q[f.head]
	f.q[f.head] = nil
	f.head++
	if f.head == len(f.q) {
		f.q, f.head = f.q[:0], 0
	} else if f.head >= 1024 && f.head*2 >= len(f.q) {
		f.q, f.head = append(f.q[:0], f.q[f.head:]...), 0
	}
	return t
}

// arm sets the stall timer; f.mu is held.
func (f *flow) arm() {
	f.armed, f.seen = true, f.done
	if f.timer == nil {
		f.timer = time.AfterFunc(f.stall, f.check)
	} else {
		f.timer.Reset(f.stall)
	}
}

// check runs at the stall timer: if messages are queued and none finished
// since the timer was set, the running ones stop counting and up to share
// queued ones start.
func (f *flow) check() {
	f.mu.Lock()
	f.armed = false
	if f.head == len(f.q) {
		f.mu.Unlock()
		return
	}
	if f.done != f.seen {
		f.arm()
		f.mu.Unlock()
		return
	}
	f.epoch++
	f.running = 0
	var ts []task
	for f.running < f.share && f.head < len(f.q) {
		ts = append(ts, f.pop())
		f.running++
	}
	if f.head < len(f.q) {
		f.arm()
	}
	ep := f.epoch
	f.mu.Unlock()
	for _, t := range ts {
		f.start(t, ep)
	}
}
