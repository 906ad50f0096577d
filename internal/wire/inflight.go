package wire

// Inflight is the table of what awaits an answer on one stream, by the id
// of the message that carried it: a batch of calls, or one call, as the
// engine puts them in messages. Ids start at 0 and grow by one a message.
// It is not safe for concurrent use: its engine guards it with its lock.
// The zero Inflight is empty and ready to use.
type Inflight[E any] struct {
	next uint64
	m    map[uint64]E
}

// Add files e under a new id and returns the id.
func (t *Inflight[E]) Add(e E) uint64 {
	if t.m == nil {
		t.m = make(map[uint64]E)
	}
	id := t.next
	t.next++
	t.m[id] = e
	return id
}

// Remove takes what id was filed with out of t, and reports whether t
// still held it (an answer to an id removed already is stale).
func (t *Inflight[E]) Remove(id uint64) (E, bool) {
	e, ok := t.m[id]
	if ok {
		delete(t.m, id)
	}
	return e, ok
}

// Len is the number of messages awaiting answers.
func (t *Inflight[E]) Len() int { return len(t.m) }

// Drain empties t and returns what it held, for the caller to fail
// (possibly after it let go of its lock). Ids go on growing: a late answer
// to a drained id finds nothing.
func (t *Inflight[E]) Drain() map[uint64]E {
	m := t.m
	t.m = nil
	return m
}
