// Package e2e holds the end-to-end suite, which runs Sluice clusters of real
// containers. Its tests are behind the e2e build tag, so `go test ./...`
// skips them; `make e2e` builds the sluice:dev image and runs them:
//
//	go test -tags e2e -count=1 -v -timeout 20m ./e2e/
//
// The suite fails (it never skips) when Docker is missing or unreachable.
package e2e
