// Package policy owns named limit policies: their YAML file format, parsing
// and validation, the hash nodes compare to tell they run the same
// policies, and the Reloader that keeps a set loaded from a watched file
// (internal/watch) up to date. A Set is immutable once built; reloading
// builds a new Set and the caller swaps it in whole.
package policy
