package main

import (
	"fmt"
	"math"

	"github.com/dustin/go-humanize"
)

// sizeFlag is a byte-size flag: a number of bytes, or a size with a unit
// as go-humanize parses it ("512MiB", "2GiB", "1.5GB"; MiB and GiB are
// powers of 1024, MB and GB of 1000).
type sizeFlag struct {
	v   *int64
	max int64 // the largest value accepted
}

func (s sizeFlag) String() string {
	if s.v == nil {
		return "0"
	}
	return formatSize(*s.v)
}

func (s sizeFlag) Set(v string) error {
	n, err := humanize.ParseBytes(v)
	if err != nil {
		return fmt.Errorf("not a size (bytes, or e.g. 512MiB, 2GiB): %q", v)
	}
	if n > uint64(s.max) {
		return fmt.Errorf("%q is more than %s", v, formatSize(s.max))
	}
	*s.v = int64(n)
	return nil
}

// formatSize prints n bytes exactly, in the largest binary unit that
// divides it.
func formatSize(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d%s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d", n)
}

// int64Size and intSize make size flags of an int64 or an int.
func int64Size(v *int64) sizeFlag { return sizeFlag{v: v, max: math.MaxInt64} }

// intSizeFlag is a size flag stored in an int.
type intSizeFlag struct{ v *int }

func (s intSizeFlag) String() string {
	if s.v == nil {
		return "0"
	}
	return formatSize(int64(*s.v))
}

func (s intSizeFlag) Set(v string) error {
	var n int64
	if err := (sizeFlag{v: &n, max: math.MaxInt32}).Set(v); err != nil {
		return err
	}
	*s.v = int(n)
	return nil
}
