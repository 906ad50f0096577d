package wire

import (
	"sync"
	"time"
)

// poolIdle is how long a worker waits for a task before it ends.
const poolIdle = 10 * time.Second

// Workers is a bounded pool of worker goroutines: a task goes to an idle
// worker, else to a new one while there are fewer than its size. Workers
// whose stacks have grown are reused rather than a goroutine started (and
// its stack grown) per message, and the goroutines of a flood are bounded
// by the pool's size. An idle worker ends after poolIdle, or at Close.
type Workers struct {
	tasks chan task
	stop  chan struct{}
	once  sync.Once
	mu    sync.Mutex
	n     int // workers alive
	max   int
}

// NewWorkers returns a pool of at most size workers.
func NewWorkers(size int) *Workers {
	return &Workers{tasks: make(chan task), stop: make(chan struct{}), max: size}
}

// task is work for a Workers pool. A pointer type implements it, so that
// handing a pooled task over allocates nothing (a func literal that
// captures variables is an allocation each time).
type task interface{ run() }

// funcTask runs a func as a task.
type funcTask func()

func (f funcTask) run() { f() }

// Go runs fn on a worker and reports true, or reports false when all
// size workers are busy.
func (p *Workers) Go(fn func()) bool { return p.goTask(funcTask(fn)) }

// goTask is Go for a task.
func (p *Workers) goTask(t task) bool {
	select {
	case p.tasks <- t:
		return true
	default:
	}
	p.mu.Lock()
	if p.n >= p.max {
		p.mu.Unlock()
		return false
	}
	p.n++
	p.mu.Unlock()
	go p.work(t)
	return true
}

// Close ends the idle workers, and the busy ones when their task ends.
func (p *Workers) Close() { p.once.Do(func() { close(p.stop) }) }

func (p *Workers) work(t task) {
	idle := time.NewTimer(poolIdle)
	defer func() {
		idle.Stop()
		p.mu.Lock()
		p.n--
		p.mu.Unlock()
	}()
	for {
		t.run()
		idle.Reset(poolIdle)
		select {
		case t = <-p.tasks:
		case <-idle.C:
			return
		case <-p.stop:
			return
		}
	}
}
