package bench

import "time"

// loop is a worker: closed loop, or open loop when an interval is set.
func (w *worker) loop() {
	r := w.r
	defer w.call.release()
	open := r.interval > 0
	for !r.stop.Load() {
		now := time.Now()
		if !now.Before(r.end) {
			return
		}
		from := now // latency counts from here: send time, or due time
		if open {
			i := r.ticket.Add(1) - 1
			due := r.start.Add(time.Duration(float64(i) * r.interval))
			if !due.Before(r.end) {
				return
			}
			if d := due.Sub(now); d > 0 {
				if !w.sleep(d) {
					return
				}
				now = time.Now()
			}
			from = due
		}
		if !w.check(now, from) {
			return
		}
	}
}

// sleep waits d, or less if the run stops; it reports whether the run
// goes on. Short waits (the usual: a worker is about Workers tickets
// ahead) are a plain sleep, cheaper than a timer and a select.
func (w *worker) sleep(d time.Duration) bool {
	if d <= 10*time.Millisecond {
		time.Sleep(d)
		return !w.r.stop.Load()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return !w.r.stop.Load()
	case <-w.r.ctx.Done():
		return false
	}
}
