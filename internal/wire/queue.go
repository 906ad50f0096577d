package wire

// A Queue holds the calls waiting for a sender, in the order they came.
// It is not safe for concurrent use: its engine guards it with its lock.
// The zero Queue is empty and ready to use.
type Queue[I, O any] struct {
	calls []*Call[I, O]
	items int // the items (In) of calls, abandoned ones included
}

// Push appends c.
func (q *Queue[I, O]) Push(c *Call[I, O]) {
	q.calls = append(q.calls, c)
	q.items += len(c.In)
}

// Len is the number of calls queued, abandoned ones included.
func (q *Queue[I, O]) Len() int { return len(q.calls) }

// Items is the number of items queued, abandoned ones included.
func (q *Queue[I, O]) Items() int { return q.items }

// Take moves calls from the head of q to batch, up to maxBatch items but
// at least one call whatever its size, and drops the abandoned calls it
// meets. It returns batch and the number of items in it; a batch with no
// call means q held none that waits.
func (q *Queue[I, O]) Take(batch []*Call[I, O], maxBatch int) ([]*Call[I, O], int) {
	n, k := 0, 0
	for ; k < len(q.calls); k++ {
		c := q.calls[k]
		if c.Abandoned() {
			q.items -= len(c.In)
			continue
		}
		if len(batch) > 0 && n+len(c.In) > maxBatch {
			break
		}
		batch = append(batch, c)
		n += len(c.In)
		q.items -= len(c.In)
	}
	rest := copy(q.calls, q.calls[k:])
	clear(q.calls[rest:])
	q.calls = q.calls[:rest]
	return batch, n
}

// Drain empties q and returns what it held, for the caller to fail (see
// FailAll), possibly after it let go of its lock.
func (q *Queue[I, O]) Drain() []*Call[I, O] {
	calls := q.calls
	q.calls, q.items = nil, 0
	return calls
}
