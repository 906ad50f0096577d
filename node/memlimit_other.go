//go:build !linux

package node

// physicalMemory returns 0 (unknown) off Linux: the cap then comes only
// from GOMEMLIMIT, or is off.
func physicalMemory() int64 { return 0 }
