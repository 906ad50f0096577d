package node

import (
	"bytes"
	"math"
	"os"
	"runtime/debug"
	"strconv"
)

// StoreMemoryShare is the share of the memory available to the process
// that the store's memory cap defaults to (see DefaultStoreMaxBytes). The
// store's estimate counts the states themselves; the Go heap around them
// (map growth, garbage between collections) and the rest of the node take
// about as much again, so half keeps the process below its limit.
const StoreMemoryShare = 0.5

// Where the memory available was found (MemorySource.Available).
const (
	MemoryFromCgroupV2   = "cgroup v2 memory.max"
	MemoryFromCgroupV1   = "cgroup v1 memory.limit_in_bytes"
	MemoryFromGoMemLimit = "GOMEMLIMIT"
	MemoryFromPhysical   = "physical memory"
)

// cgroup files that hold the container's memory limit.
const (
	cgroupV2MemoryMax = "/sys/fs/cgroup/memory.max"
	cgroupV1Limit     = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
)

// MemorySource reads how much memory the process may use. HostMemory reads
// the real ones; tests inject fakes.
type MemorySource struct {
	// ReadFile reads a file (the cgroup limits); os.ReadFile in HostMemory.
	ReadFile func(name string) ([]byte, error)
	// GoMemLimit returns the Go runtime's soft memory limit
	// (debug.SetMemoryLimit(-1): GOMEMLIMIT), math.MaxInt64 when unset.
	GoMemLimit func() int64
	// Physical returns the machine's physical memory in bytes, 0 when
	// unknown.
	Physical func() int64
}

// HostMemory is the MemorySource of this process: its cgroup's files, its
// GOMEMLIMIT and the machine's physical memory.
func HostMemory() MemorySource {
	return MemorySource{
		ReadFile:   os.ReadFile,
		GoMemLimit: func() int64 { return debug.SetMemoryLimit(-1) },
		Physical:   physicalMemory,
	}
}

// Available returns the memory the process may use and where that was
// found: the smaller of the container's limit (cgroup v2 memory.max, else
// cgroup v1 memory.limit_in_bytes) and GOMEMLIMIT, whichever are set; else
// the physical memory. It returns 0 and "" when none is known.
func (s MemorySource) Available() (int64, string) {
	phys := int64(0)
	if s.Physical != nil {
		phys = s.Physical()
	}
	best, from := int64(0), ""
	consider := func(v int64, src string) {
		// A limit at or above the machine's memory limits nothing (cgroup
		// v1 writes "no limit" as a huge number).
		if v <= 0 || v == math.MaxInt64 || (phys > 0 && v >= phys) {
			return
		}
		if best == 0 || v < best {
			best, from = v, src
		}
	}
	if v, src := s.containerLimit(); src != "" {
		consider(v, src)
	}
	if s.GoMemLimit != nil {
		consider(s.GoMemLimit(), MemoryFromGoMemLimit)
	}
	if best == 0 && phys > 0 {
		return phys, MemoryFromPhysical
	}
	return best, from
}

// ContainerLimit returns the container's memory limit and where it was
// found (cgroup v2 memory.max, else cgroup v1 memory.limit_in_bytes), or 0
// and "" when there is none below the machine's physical memory.
func (s MemorySource) ContainerLimit() (int64, string) {
	v, src := s.containerLimit()
	if v <= 0 || v == math.MaxInt64 {
		return 0, ""
	}
	if s.Physical != nil {
		if phys := s.Physical(); phys > 0 && v >= phys {
			return 0, ""
		}
	}
	return v, src
}

// containerLimit is the cgroup limit as read (math.MaxInt64: "max") and
// its source, "" when no cgroup file was readable.
func (s MemorySource) containerLimit() (int64, string) {
	if s.ReadFile == nil {
		return 0, ""
	}
	if v, ok := s.cgroupLimit(cgroupV2MemoryMax); ok {
		return v, MemoryFromCgroupV2
	}
	if v, ok := s.cgroupLimit(cgroupV1Limit); ok {
		return v, MemoryFromCgroupV1
	}
	return 0, ""
}

// cgroupLimit reads a cgroup memory limit file: a byte count, or "max"
// (no limit, reported as math.MaxInt64). ok is false when the file is
// absent or unreadable.
func (s MemorySource) cgroupLimit(name string) (int64, bool) {
	b, err := s.ReadFile(name)
	if err != nil {
		return 0, false
	}
	v := string(bytes.TrimSpace(b))
	if v == "max" {
		return math.MaxInt64, true
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, false
	}
	if n > math.MaxInt64 {
		return math.MaxInt64, true
	}
	return int64(n), true
}

// DefaultStoreMaxBytes is the store memory cap of DefaultConfig:
// StoreMemoryShare of the memory s says is available, rounded down to a
// MiB, and where that was found. It is 0 (no cap) only when nothing is
// known.
func DefaultStoreMaxBytes(s MemorySource) (int64, string) {
	avail, from := s.Available()
	const mib = 1 << 20
	return int64(float64(avail)*StoreMemoryShare) / mib * mib, from
}

// ClientKeyShare is the share of the store's cap that one client identity's
// keys may fill by default (DefaultMaxKeysPerClient).
const ClientKeyShare = 0.25

// ClientKeyBytes is what the store's estimate counts for a client's token
// bucket key under its cap: the state (40 bytes) and the slot that names
// its creator (40 bytes).
const ClientKeyBytes = 80

// DefaultMaxKeysPerClient is the cap of live keys per client identity
// (Store.MaxKeysPerClient) for a store capped at maxBytes: a quarter of
// the cap, at ClientKeyBytes a key. 0 (no cap) for an uncapped store.
func DefaultMaxKeysPerClient(maxBytes int64) int64 {
	return int64(float64(maxBytes) * ClientKeyShare / ClientKeyBytes)
}
