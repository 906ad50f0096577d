package wire

import (
	"slices"
	"testing"
)

func TestQueueTake(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sizes     []int  // items of each queued call
		abandoned string // 'x' marks an abandoned call
		maxBatch  int
		want      []int // indexes of the calls taken
		wantN     int
		wantRest  []int // indexes of the calls left
	}{
		{name: "empty", maxBatch: 4},
		{name: "all fit", sizes: []int{1, 2, 1}, abandoned: "...", maxBatch: 4, want: []int{0, 1, 2}, wantN: 4},
		{name: "up to maxBatch", sizes: []int{2, 2, 1}, abandoned: "...", maxBatch: 4, want: []int{0, 1}, wantN: 4, wantRest: []int{2}},
		{name: "stops at the first that does not fit", sizes: []int{3, 2, 1}, abandoned: "...", maxBatch: 4, want: []int{0}, wantN: 3, wantRest: []int{1, 2}},
		{name: "one call larger than maxBatch", sizes: []int{6, 1}, abandoned: "..", maxBatch: 4, want: []int{0}, wantN: 6, wantRest: []int{1}},
		{name: "skips abandoned", sizes: []int{2, 3, 2}, abandoned: ".x.", maxBatch: 4, want: []int{0, 2}, wantN: 4},
		{name: "abandoned do not count", sizes: []int{4, 4, 1}, abandoned: "x..", maxBatch: 4, want: []int{1}, wantN: 4, wantRest: []int{2}},
		{name: "only abandoned", sizes: []int{1, 1}, abandoned: "xx", maxBatch: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p Pool[int, int]
			var q Queue[int, int]
			calls := make([]*Call[int, int], len(tc.sizes))
			total := 0
			for i, size := range tc.sizes {
				calls[i] = p.Get()
				calls[i].In = make([]int, size)
				q.Push(calls[i])
				total += size
				if tc.abandoned[i] == 'x' {
					calls[i].abandon()
				}
			}
			if q.Len() != len(calls) || q.Items() != total {
				t.Fatalf("queued %d calls and %d items, want %d and %d", q.Len(), q.Items(), len(calls), total)
			}
			batch, n := q.Take(nil, tc.maxBatch)
			if got := indexes(calls, batch); !slices.Equal(got, tc.want) || n != tc.wantN {
				t.Fatalf("took calls %v (%d items), want %v (%d)", got, n, tc.want, tc.wantN)
			}
			rest := q.Drain()
			if got := indexes(calls, rest); !slices.Equal(got, tc.wantRest) {
				t.Fatalf("left calls %v, want %v", got, tc.wantRest)
			}
			if q.Len() != 0 || q.Items() != 0 {
				t.Fatalf("after Drain: %d calls, %d items", q.Len(), q.Items())
			}
		})
	}
}

// Items counts what is left after a Take, abandoned calls included until
// a Take drops them.
func TestQueueItems(t *testing.T) {
	var p Pool[int, int]
	var q Queue[int, int]
	for _, size := range []int{2, 2, 3} {
		c := p.Get()
		c.In = make([]int, size)
		q.Push(c)
	}
	if _, n := q.Take(nil, 2); n != 2 || q.Items() != 5 || q.Len() != 2 {
		t.Fatalf("took %d items, left %d items in %d calls; want 2, 5, 2", n, q.Items(), q.Len())
	}
	rest := q.Drain()
	rest[0].abandon()
	q.Push(rest[0])
	q.Push(rest[1])
	if _, n := q.Take(nil, 10); n != 3 || q.Items() != 0 || q.Len() != 0 {
		t.Fatalf("took %d items, left %d items in %d calls; want 3, 0, 0", n, q.Items(), q.Len())
	}
}

// indexes maps each of got to its index in calls.
func indexes(calls, got []*Call[int, int]) []int {
	var out []int
	for _, c := range got {
		out = append(out, slices.Index(calls, c))
	}
	return out
}
