// Package ownership is the one handoff protocol of partitions between
// nodes, keyed by the epochs of an agreed log of ring changes.
package ownership
