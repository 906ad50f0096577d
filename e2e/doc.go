// Package e2e holds the end-to-end suite, which runs Sluice clusters of real
// containers. Its tests are behind the e2e build tag, so `go test ./...`
// skips them; `make e2e` builds the sluice:dev image and runs them:
//
//	go test -tags e2e -count=1 -v -timeout 20m ./e2e/
//
// The suite fails (it never skips) when Docker is missing or unreachable.
// SLUICE_E2E_IMAGE names another image to test than sluice:dev (worktrees
// sharing one Docker daemon build images of their own). TestE2E runs the
// cluster scenarios; TestE2EGossipEncryption runs a cluster with
// --gossip-key-file and a node with another key that must not join.
package e2e
