// Command rlsref is the independent proof of Sluice's Envoy RLS v3 service:
// it runs envoyproxy/ratelimit, the reference implementation, built from the
// Go module proxy at the version pinned in this nested module's go.mod, with
// a Redis from Debian, and records what it answers.
//
//	make rlsref                 # builds bin/ratelimit from this module
//	make rls-record             # re-records the goldens (needs the reference and redis-server)
//	make rls-conformance        # the same cases against the reference and Sluice, side by side
//	make rls-validate           # re-records which configs the reference accepts
//
// Subcommands:
//
//	rlsref record [--cases DIR] [--ratelimit BIN] [--only a,b]
//	    runs every case of DIR (node/testdata/rls-conformance) against the
//	    reference + Redis and writes DIR/<case>/golden.json: each request,
//	    the wall-clock time it was sent and answered at, and the reference's
//	    exact answer (protojson) or gRPC error (code and message).
//	rlsref live [--cases DIR] [--ratelimit BIN] [--sluice BIN] [--nodes N]
//	    runs every case against the reference and a live Sluice (N `sluice
//	    serve --rls-config` nodes) at the same moments and reports every
//	    answer that differs.
//	rlsref validate [--cases DIR] [--config-check BIN] [--only a,b]
//	    runs the reference's config checker (src/config_check_cmd, built to
//	    bin/ratelimit-config-check) on every DIR/<case>/config
//	    (rls/testdata/reference-validation) and writes DIR/<case>/verdict.json:
//	    accepted or not, and its message; rls's
//	    TestLoadAcceptsWhatTheReferenceAccepts requires Load to agree.
//
// The suite's cases are data, not code: DIR/<case>/config/ is the case's
// ratelimit configuration (one YAML file per domain, exactly the
// reference's format) and DIR/<case>/case.json its requests. The replay in
// the main module (node/rls_conformance_test.go) reads the same files and the
// goldens, and needs neither the reference nor Redis.
//
// This is its own module so that the main go.mod stays free of the
// reference and its dependencies.
package main
