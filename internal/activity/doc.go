// Package activity keeps what a node's status page (/ui) shows of its
// traffic, in bounded memory: a Series of checks and denials per interval
// (a fixed ring of slots, closed by Tick) and HotKeys, the most checked keys
// by a Space-Saving sketch (Metwally, Agrawal, El Abbadi, "Efficient
// computation of frequent and top-k elements in data streams", 2005) with a
// fixed number of counters. The limiter feeds a Recorder where it counts its
// check metrics; nothing here is a Prometheus metric, and there are no
// per-key metrics. Pure: no clock, no network, no goroutines.
package activity
