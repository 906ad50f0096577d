// Package layout holds no code: its test checks the repository's layout
// rules, which DEVELOPERS.md describes. Imports flow one way (cmd -> node
// -> {api, transport, cluster} -> limiter -> {store -> bucket, ring}; api
// and transport share internal/wire and never import each other), and no
// hand-written source file reaches 500 lines.
package layout
