package node_test

import (
	"io/fs"
	"math"
	"testing"

	"github.com/sluice-rl/sluice/node"
)

// fakeMemory is a MemorySource over fake cgroup files.
func fakeMemory(files map[string]string, goMemLimit, physical int64) node.MemorySource {
	return node.MemorySource{
		ReadFile: func(name string) ([]byte, error) {
			if v, ok := files[name]; ok {
				return []byte(v), nil
			}
			return nil, fs.ErrNotExist
		},
		GoMemLimit: func() int64 { return goMemLimit },
		Physical:   func() int64 { return physical },
	}
}

const (
	v2 = "/sys/fs/cgroup/memory.max"
	v1 = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
	gi = int64(1) << 30
)

// The store cap defaults to half the memory available: the container's
// cgroup limit or GOMEMLIMIT, whichever is smaller, else physical memory.
func TestDefaultStoreMaxBytes(t *testing.T) {
	unset := int64(math.MaxInt64)
	for _, tc := range []struct {
		name     string
		files    map[string]string
		goLimit  int64
		physical int64
		want     int64
		from     string
	}{
		{"cgroup v2", map[string]string{v2: "2147483648\n"}, unset, 24 * gi, 1 * gi, node.MemoryFromCgroupV2},
		{"cgroup v2 max", map[string]string{v2: "max\n"}, unset, 24 * gi, 12 * gi, node.MemoryFromPhysical},
		{"cgroup v1", map[string]string{v1: "1073741824\n"}, unset, 24 * gi, gi / 2, node.MemoryFromCgroupV1},
		{"cgroup v1 unlimited", map[string]string{v1: "9223372036854771712\n"}, unset, 24 * gi, 12 * gi, node.MemoryFromPhysical},
		{"v2 wins over v1", map[string]string{v2: "4294967296", v1: "1073741824"}, unset, 24 * gi, 2 * gi, node.MemoryFromCgroupV2},
		{"GOMEMLIMIT below the cgroup", map[string]string{v2: "2147483648"}, 1800 << 20, 24 * gi, 900 << 20, node.MemoryFromGoMemLimit},
		{"cgroup below GOMEMLIMIT", map[string]string{v2: "2147483648"}, 3 * gi, 24 * gi, 1 * gi, node.MemoryFromCgroupV2},
		{"GOMEMLIMIT alone", nil, 4 * gi, 24 * gi, 2 * gi, node.MemoryFromGoMemLimit},
		{"physical memory", nil, unset, 24 * gi, 12 * gi, node.MemoryFromPhysical},
		{"garbage file", map[string]string{v2: "lots"}, unset, 8 * gi, 4 * gi, node.MemoryFromPhysical},
		{"limit above physical", map[string]string{v2: "68719476736"}, unset, 8 * gi, 4 * gi, node.MemoryFromPhysical},
		{"nothing known", nil, unset, 0, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, from := node.DefaultStoreMaxBytes(fakeMemory(tc.files, tc.goLimit, tc.physical))
			if got != tc.want || from != tc.from {
				t.Errorf("DefaultStoreMaxBytes = %d (%s), want %d (%s)", got, from, tc.want, tc.from)
			}
		})
	}
}

// The default configuration has a store cap on this machine too.
func TestDefaultConfigCapsTheStore(t *testing.T) {
	c := node.DefaultConfig()
	want, from := node.DefaultStoreMaxBytes(node.HostMemory())
	if c.Store.MaxBytes <= 0 || c.Store.MaxBytes != want {
		t.Fatalf("Store.MaxBytes = %d, want %d (%s)", c.Store.MaxBytes, want, from)
	}
}

// The container's limit is the cgroup's alone, none when it limits nothing.
func TestContainerLimit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		files    map[string]string
		physical int64
		want     int64
		from     string
	}{
		{"cgroup v2", map[string]string{v2: "2147483648\n"}, 24 * gi, 2 * gi, node.MemoryFromCgroupV2},
		{"cgroup v1", map[string]string{v1: "1073741824\n"}, 24 * gi, gi, node.MemoryFromCgroupV1},
		{"v2 wins over v1", map[string]string{v2: "4294967296", v1: "1073741824"}, 24 * gi, 4 * gi, node.MemoryFromCgroupV2},
		{"cgroup v2 max", map[string]string{v2: "max\n"}, 24 * gi, 0, ""},
		{"cgroup v1 unlimited", map[string]string{v1: "9223372036854771712\n"}, 24 * gi, 0, ""},
		{"limit above physical", map[string]string{v2: "68719476736"}, 8 * gi, 0, ""},
		{"physical unknown", map[string]string{v2: "2147483648"}, 0, 2 * gi, node.MemoryFromCgroupV2},
		{"no cgroup", nil, 24 * gi, 0, ""},
		{"garbage file", map[string]string{v2: "lots"}, 8 * gi, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// GOMEMLIMIT plays no part.
			got, from := fakeMemory(tc.files, gi/4, tc.physical).ContainerLimit()
			if got != tc.want || from != tc.from {
				t.Errorf("ContainerLimit = %d (%s), want %d (%s)", got, from, tc.want, tc.from)
			}
		})
	}
}
