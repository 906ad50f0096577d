// Package policy owns named limit policies: their YAML file format, parsing
// and validation. A Set is immutable once built; reloading builds a new Set
// and the caller swaps it in whole.
package policy
