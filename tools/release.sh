#!/bin/sh
# tools/release.sh: the steps of `make release VERSION=x.y.z` (docs/releasing.md).
#
#   tools/release.sh check x.y.z   the version checks alone (no build, no Docker)
#   tools/release.sh build x.y.z   the checks, then dist/: static linux/amd64 and
#                                  linux/arm64 binaries, the image tarball, the
#                                  chart package, a CycloneDX SBOM and SHA256SUMS
#
# Run from the repository root. The checks: x.y.z is a semantic version
# without the v; it is the committed file VERSION's (the source of truth: the
# release is refused, never the file rewritten, so that the version, the
# CHANGELOG section and the chart change together in a reviewed commit); the
# chart's version and appVersion, api/openapi.yaml's info.version and a
# CHANGELOG.md section "## [x.y.z]" agree; a v-tag on HEAD, if any, is vx.y.z;
# the work tree is clean (ALLOW_DIRTY=1 builds from a dirty one, for a trial).
# build takes LDFLAGS, COMMIT and GO (the Makefile's) from the environment.
set -eu

die() {
	echo "release: $*" >&2
	exit 1
}

[ $# -eq 2 ] || die "usage: tools/release.sh check|build x.y.z"
cmd=$1
version=$2

check() {
	echo "$version" | grep -Eq '^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$' ||
		die "VERSION=$version: want a semantic version x.y.z, without the v"
	[ -f VERSION ] || die "no file VERSION: run from the repository root"
	file=$(cat VERSION)
	[ "$version" = "$file" ] ||
		die "VERSION=$version differs from the file VERSION ($file): change the file, CHANGELOG.md and the chart in a commit first"
	grep -Eq "^version: \"?$version\"?\$" deploy/helm/sluice/Chart.yaml ||
		die "deploy/helm/sluice/Chart.yaml: version is not $version"
	grep -Eq "^appVersion: \"?$version\"?\$" deploy/helm/sluice/Chart.yaml ||
		die "deploy/helm/sluice/Chart.yaml: appVersion is not $version"
	grep -Eq "^  version: \"?$version\"?\$" api/openapi.yaml ||
		die "api/openapi.yaml: info.version is not $version"
	grep -Eq "^## \[$version\]" CHANGELOG.md ||
		die "CHANGELOG.md: no section \"## [$version]\""
	for t in $(git tag --points-at HEAD 'v*'); do
		[ "$t" = "v$version" ] || die "HEAD is tagged $t, not v$version"
	done
	if [ -z "${ALLOW_DIRTY:-}" ] && [ -n "$(git status --porcelain)" ]; then
		die "the work tree has uncommitted changes: commit them first (ALLOW_DIRTY=1 builds anyway, for a trial)"
	fi
}

build() {
	: "${LDFLAGS:?LDFLAGS must be set (make release sets it)}"
	go=${GO:-go}
	command -v docker >/dev/null || die "docker not found: the image tarball needs Docker Engine"
	rm -rf dist
	mkdir -p dist
	for arch in amd64 arm64; do
		echo "release: dist/sluice-$version-linux-$arch"
		CGO_ENABLED=0 GOOS=linux GOARCH=$arch $go build -trimpath -ldflags "$LDFLAGS" \
			-o "dist/sluice-$version-linux-$arch" ./cmd/sluice
	done
	# The image: the Dockerfile around bin/sluice (make image), this host's
	# platform, saved as docker save | gzip.
	host_arch=$($go env GOARCH)
	make --no-print-directory image VERSION="$version" COMMIT="${COMMIT:-}"
	echo "release: dist/sluice-image-$version-linux-$host_arch.tar.gz"
	docker save "sluice:$version" | gzip >"dist/sluice-image-$version-linux-$host_arch.tar.gz"
	# The chart, with Helm's Go packages (the nested module tools/helmcheck).
	echo "release: dist/sluice-$version.tgz"
	(cd tools/helmcheck && $go run . package --version "$version" --out ../../dist ../../deploy/helm/sluice >/dev/null)
	# The SBOM of the Go module (its module graph), CycloneDX JSON. The mod
	# mode: app mode needs the module's version from git, which go-git cannot
	# read in a linked worktree; mod mode only warns and leaves it out.
	echo "release: dist/sluice-$version.cdx.json"
	$go run github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0 mod -json -type application \
		-output "dist/sluice-$version.cdx.json" . ||
		die "cyclonedx-gomod failed"
	(cd dist && sha256sum -- * >SHA256SUMS)
	echo "release: dist/SHA256SUMS"
	ls -l dist
}

case $cmd in
check) check ;;
build)
	check
	build
	;;
*) die "unknown step $cmd: want check or build" ;;
esac
