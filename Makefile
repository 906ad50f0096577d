# Sluice: the targets a developer and CI use. Tool versions are pinned here.
GO             ?= go
BIN            := bin
TOOLS          := $(CURDIR)/$(BIN)/tools
PROTOC_GEN_GO      := google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GO_GRPC := google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.1
PROTOC_GEN_GO_VTPROTO := github.com/planetscale/vtprotobuf/cmd/protoc-gen-go-vtproto@v0.6.0
STATICCHECK        := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# VERSION: the release version, x.y.z without the v. The committed file VERSION is its source of
# truth (so a clean clone builds with it); a v-tag on HEAD, if any, must match it (make release).
VERSION        ?= $(shell cat VERSION)
COMMIT         ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS        := -s -w -X github.com/sluice-rl/sluice/internal/version.Version=v$(VERSION) -X github.com/sluice-rl/sluice/internal/version.Commit=$(COMMIT)
# Test flags: the race detector, and every package's tests.
TESTFLAGS      ?= -race -count=1 -timeout 15m

.PHONY: all build run test sim nginx chaos chaos-tools fuzz fuzz-short bench bench-check bench-compare gubref proto proto-check lint tools clean image e2e rlsref rls-record rls-validate rls-conformance helm-check ui-screenshot release release-check tag

all: build

## build: the static sluice binary in bin/sluice
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/sluice ./cmd/sluice

## run: one node that is a whole cluster of one (gRPC :8081, HTTP :8080); a first build
## says so before it starts, since it downloads and compiles for a minute or two
run:
	@test -x $(BIN)/sluice || echo "make run: building bin/sluice first (a first build takes 1-2 minutes; later ones seconds)"
	@$(MAKE) --no-print-directory build
	./$(BIN)/sluice serve

## test: every test, with the race detector, then each fuzz target briefly (fuzz-short). The
## fuzz stage runs even when a test fails; make test then still fails, after it
test:
	@st=0; $(GO) test $(TESTFLAGS) ./... || st=1; \
	$(MAKE) --no-print-directory fuzz-short || st=1; \
	if [ $$st -ne 0 ]; then echo "make test: FAILED (the tests or the fuzz stage above)" >&2; fi; \
	exit $$st

## sim: the ownership protocol's long simulation, SIM_SCHEDULES seeded schedules (make test runs
## 300 of them); a failing seed replays with go test ./limiter/ownership/ -run TestSim -seed N -v
SIM_SCHEDULES  ?= 10000
sim:
	$(GO) test -count=1 -timeout 90m -run 'TestSim$$' -v ./limiter/ownership/ -schedules $(SIM_SCHEDULES)

## nginx: Debian's nginx-light when nginx is missing, for the nginx recipe test of deploy/ (needs root)
# Debian's package starts the system nginx on :80 once installed unless a
# policy-rc.d forbids it; the tests run their own, so one is put in place
# for the install (and removed after) where the machine has none.
nginx:
	@command -v nginx >/dev/null || test -x /usr/sbin/nginx || { \
		export DEBIAN_FRONTEND=noninteractive; rc=/usr/sbin/policy-rc.d; own=; \
		if [ ! -e $$rc ]; then printf '#!/bin/sh\nexit 101\n' > $$rc && chmod +x $$rc && own=1; fi; \
		apt-get update -qq && apt-get install -y -qq nginx-light >/dev/null; st=$$?; \
		if [ -n "$$own" ]; then rm -f $$rc; fi; exit $$st; }

# FUZZ_TARGETS: every fuzz test, as package-dir:Func, one per decoder of outside bytes.
FUZZ_TARGETS   := api:FuzzDecodeCheck api:FuzzDecodeStream api:FuzzDecodeCheckFast api:FuzzHTTPCheck api:FuzzHTTPReserve api:FuzzGRPCCheck api:FuzzShouldRateLimit api:FuzzRLSJSON api:FuzzUIQuery api:FuzzAdminBody \
	policy:FuzzParse rls:FuzzParse rls/xds:FuzzConvert \
	transport:FuzzPeerItems transport:FuzzKeyStates transport:FuzzPeerResults transport:FuzzRaftRequest \
	cluster:FuzzDecodeMeta cluster:FuzzDecodeProbe cluster:FuzzParseGossipKeys client/middleware:FuzzClientIP \
	internal/clustersecret:FuzzParse internal/keyfile:FuzzParse epoch:FuzzDecodeRecord epoch:FuzzUnmarshalMessage internal/persist:FuzzDecodeRecord
FUZZ_PKGS      := $(sort $(foreach t,$(FUZZ_TARGETS),$(firstword $(subst :, ,$(t)))))
FUZZTIME       ?= 2s

## fuzz: run each fuzz target for FUZZTIME, a duration or a count of inputs (e.g. make fuzz
## FUZZTIME=5m, or FUZZTIME=1000000x, which Go 1.26 cannot fail at its deadline). Each package's
## instrumented test binary is built once (bin/fuzz) and run in its directory, so a failure
## is saved under the package's testdata/fuzz, which go test replays from then on; the
## corpus grows in go's cache as with go test -fuzz.
fuzz:
	@set -e; mkdir -p $(BIN)/fuzz; \
	cache=$$($(GO) env GOCACHE)/fuzz/$$($(GO) list -m); \
	for p in $(FUZZ_PKGS); do $(GO) test -c -fuzz . -o $(BIN)/fuzz/$$p.test ./$$p; done; \
	for t in $(FUZZ_TARGETS); do \
		p=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$p $$fn ($(FUZZTIME))"; \
		(cd $$p && $(CURDIR)/$(BIN)/fuzz/$$p.test -test.run '^$$' -test.fuzz "^$$fn\$$" \
			-test.fuzztime $(FUZZTIME) -test.fuzzcachedir $$cache/$$p); \
	done

## fuzz-short: each fuzz target for 10000 inputs (part of make test). A count, not a
## duration: Go 1.26's fuzz coordinator can fail a target with a bare "context deadline
## exceeded" when a -fuzztime duration ends while a worker is busy (golang/go#75804, fixed
## in Go 1.27); a count sets no deadline, so a loaded machine only makes it slower.
fuzz-short:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=10000x

## bench: the benchmarks whose figures are in docs/benchmarks.md
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./bucket/
	$(GO) test -run '^$$' -bench 'TakeToken' -benchmem ./store/
	$(GO) test -run '^$$' -bench 'Store10M' -benchtime 1x ./store/
	$(GO) test -run '^$$' -bench 'CheckGRPC' -benchtime 3s ./node/
	$(GO) test -run '^$$' -bench 'Cluster3' -benchtime 3s ./node/
	$(GO) test -run '^$$' -bench 'HotKey' -benchtime 100000x ./node/
	$(GO) test -run '^$$' -bench 'OwnerLoss' -benchtime 1x ./node/

## bench-check: the regression guard of the counts per check, against cmd/benchcheck/baseline.txt:
## allocations (go test -benchmem: the node's single-item check over gRPC and HTTP with its client
## in another process, the limiter's local check, the RLS path) must not grow, and the node's
## instructions per check (valgrind's callgrind) not by more than 5%. Needs valgrind (apt-get
## install valgrind). UPDATE=1 records the measured counts as the new baseline.
UPDATE         ?=
bench-check:
	$(GO) run ./cmd/benchcheck $(if $(UPDATE),-update)

## bench-compare: Sluice (3 nodes) vs Redis + Lua vs Gubernator v2 (3 nodes) vs a bare gRPC echo on loopback, and Sluice's Envoy
## RLS vs envoyproxy/ratelimit + Redis (scenarios f, g: --only rls), in one run; rewrites their
## sections of docs/benchmarks.md (installs redis-server if missing; builds the reference: rlsref).
## BENCH_FLAGS passes flags, e.g. make bench-compare BENCH_FLAGS='--quick --keys-e 200000'
BENCH_FLAGS    ?=
bench-compare: build rlsref gubref
	$(GO) build -o $(BIN)/benchcompare ./cmd/benchcompare
	./$(BIN)/benchcompare --sluice ./$(BIN)/sluice --ratelimit ./$(BIN)/ratelimit --gubernator ./$(BIN)/gubernator $(BENCH_FLAGS)

## gubref: Gubernator v2 (the fourth system of bench-compare's a-d) in bin/gubernator, from the
## nested module tools/gubref (its go.mod pins gubernator-io/gubernator v2.13.0 and its
## dependencies; the main go.mod stays clean). Not part of CI.
GUBREF         := tools/gubref
gubref:
	cd $(GUBREF) && $(GO) vet . && $(GO) build -trimpath -o $(CURDIR)/$(BIN)/gubernator .

## rlsref: envoyproxy/ratelimit, the reference of the Envoy RLS conformance suite and bench, in
## bin/ratelimit, from the nested module tools/rlsref/reference (its go.mod pins the reference and
## its dependencies as the reference's own go.mod has them), and its recorder bin/rlsref, from the
## nested module tools/rlsref (which uses the main module's internal/procs); the main go.mod stays
## clean. Not part of CI: the goldens are committed.
RLSREF         := tools/rlsref
rlsref:
	cd $(RLSREF)/reference && $(GO) build -trimpath -o $(CURDIR)/$(BIN)/ratelimit github.com/envoyproxy/ratelimit/src/service_cmd
	cd $(RLSREF)/reference && $(GO) build -trimpath -o $(CURDIR)/$(BIN)/ratelimit-config-check github.com/envoyproxy/ratelimit/src/config_check_cmd
	cd $(RLSREF) && $(GO) vet . && $(GO) build -trimpath -o $(CURDIR)/$(BIN)/rlsref .

## rls-record: re-record node/testdata/rls-conformance/*/golden.json from the reference + Redis
## (installs redis-server if missing). RLS_FLAGS passes flags, e.g. RLS_FLAGS='--only wildcard'
RLS_FLAGS      ?=
rls-record: rlsref
	./$(BIN)/rlsref record $(RLS_FLAGS)

## rls-validate: re-record rls/testdata/reference-validation/*/verdict.json: which configs the
## reference's own config checker accepts
rls-validate: rlsref
	./$(BIN)/rlsref validate $(RLS_FLAGS)

## rls-conformance: every conformance case against the reference and a live 3-node Sluice at the
## same moments; fails on any answer that differs
rls-conformance: build rlsref
	./$(BIN)/rlsref live --sluice ./$(BIN)/sluice $(RLS_FLAGS)

## helm-check: lint, render and check the Helm chart deploy/helm/sluice with Helm's own Go packages
## (helm.sh/helm/v4), from the nested module tools/helmcheck (the main go.mod stays clean; no helm
## binary): its default values and each ci/*-values.yaml, manifests decoded strictly into their API
## types, every SLUICE_* variable a flag of bin/sluice serve. Part of CI.
HELMCHECK      := tools/helmcheck
helm-check: build
	cd $(HELMCHECK) && $(GO) vet . && $(GO) test -count=1 . && $(GO) build -o $(CURDIR)/$(BIN)/helmcheck .
	./$(BIN)/helmcheck --sluice ./$(BIN)/sluice deploy/helm/sluice

## release: VERSION=x.y.z (the file VERSION's; the release is refused otherwise, and on a dirty
## tree unless ALLOW_DIRTY=1) builds dist/: static linux/amd64 and linux/arm64 binaries, the image
## (make image) as a docker save | gzip tarball, the chart package, a CycloneDX SBOM (cyclonedx-gomod
## v1.10.0 through go run) and SHA256SUMS (tools/release.sh; docs/releasing.md). Needs Docker Engine.
release:
	LDFLAGS='$(LDFLAGS)' COMMIT='$(COMMIT)' GO='$(GO)' tools/release.sh build $(VERSION)

## release-check: the version checks of make release alone, without building (no Docker)
release-check:
	tools/release.sh check $(VERSION)

## tag: the annotated tag vVERSION on HEAD, after release-check (push it yourself)
tag: release-check
	git tag -a v$(VERSION) -m "Sluice v$(VERSION)"

## image: the FROM scratch container image around the static binary, tagged sluice:VERSION (the
## chart's default) and sluice:dev (what e2e runs)
image: build
	@command -v docker >/dev/null || { echo "docker not found: make image needs Docker Engine" >&2; exit 1; }
	docker build -t sluice:$(VERSION) -t sluice:dev .

## ui-screenshot: docs/ui.png, the status page of a 3-node cluster in headless Chromium (node's
## TestStatusPageInBrowser; tools/install-chromium.sh installs Debian's chromium when missing)
ui-screenshot:
	tools/install-chromium.sh
	SLUICE_UI_SCREENSHOT=$(CURDIR)/docs/ui.png $(GO) test -count=1 -run '^TestStatusPageInBrowser$$' ./node

## e2e: the end-to-end suite on real containers (needs Docker Engine), with a
## E2E_CHAOS_DURATION run of the randomized fault test (TestChaos)
E2E_CHAOS_DURATION ?= 3m
# E2E_CHAOS_STRICT: true (as make chaos) fails on a key above its fault's
# bound or a call not answered in time; false only reports them
E2E_CHAOS_STRICT   ?= true
e2e: image chaos-tools
	$(GO) test -tags e2e -count=1 -v -timeout 30m ./e2e/ -args -chaos.duration=$(E2E_CHAOS_DURATION) -chaos.strict=$(E2E_CHAOS_STRICT)

## chaos: the randomized fault test alone on real containers, for CHAOS_DURATION
## (kills, restarts, partitions, a split, netem delays, joins and leaves under
## load; docs/failure.md); CHAOS_SEED replays the schedule a run printed;
## CHAOS_ONLY=kill,split draws only those kinds (joins and leaves too, to keep 3-5 nodes);
## SLUICE_E2E_LOG_DIR=dir keeps every node's log, SLUICE_E2E_NODE_ENV=SLUICE_LOG_LEVEL=debug
CHAOS_DURATION ?= 3m
CHAOS_SEED     ?= 0
CHAOS_ONLY     ?=
chaos: image chaos-tools
	$(GO) test -tags e2e -count=1 -v -timeout 90m -run '^TestChaos$$' ./e2e/ -args -chaos.duration=$(CHAOS_DURATION) -chaos.seed=$(CHAOS_SEED) -chaos.only=$(CHAOS_ONLY)

## chaos-tools: what the fault test runs on the host, from Debian's packages when
## missing: nsenter (util-linux), iptables, tc (iproute2) (needs root)
chaos-tools:
	@missing=; command -v nsenter >/dev/null || missing="$$missing util-linux"; \
	command -v iptables >/dev/null || test -x /usr/sbin/iptables || missing="$$missing iptables"; \
	command -v tc >/dev/null || test -x /usr/sbin/tc || missing="$$missing iproute2"; \
	if [ -n "$$missing" ]; then export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -qq && apt-get install -y -qq $$missing >/dev/null; fi

## tools: the pinned protoc plugins and linters, in bin/tools
tools: $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc $(TOOLS)/protoc-gen-go-vtproto $(TOOLS)/staticcheck
$(TOOLS)/protoc-gen-go:
	GOBIN=$(TOOLS) $(GO) install $(PROTOC_GEN_GO)
$(TOOLS)/protoc-gen-go-grpc:
	GOBIN=$(TOOLS) $(GO) install $(PROTOC_GEN_GO_GRPC)
$(TOOLS)/protoc-gen-go-vtproto:
	GOBIN=$(TOOLS) $(GO) install $(PROTOC_GEN_GO_VTPROTO)
$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install $(STATICCHECK)

# VTPROTO_POOL: the hot Check messages that get vtprotobuf memory pools.
SLUICEV1       := github.com/sluice-rl/sluice/proto/sluice/v1
VTPROTO_POOL   := CheckRequest CheckItem CheckResponse CheckResult CheckStreamRequest CheckStreamResponse \
	PeerCheckRequest PeerItem PeerCheckResponse PeerResult

## proto: regenerate the committed protobuf code (needs protoc: apt-get install protobuf-compiler)
proto: $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc $(TOOLS)/protoc-gen-go-vtproto
	@command -v protoc >/dev/null || { echo "protoc not found: apt-get install protobuf-compiler" >&2; exit 1; }
	PATH=$(TOOLS):$$PATH protoc -I proto \
		--go_out=proto --go_opt=paths=source_relative \
		--go-grpc_out=proto --go-grpc_opt=paths=source_relative \
		--go-vtproto_out=proto \
		--go-vtproto_opt=paths=source_relative,features=marshal+unmarshal+size+pool \
		$(foreach m,$(VTPROTO_POOL),--go-vtproto_opt=pool=$(SLUICEV1).$(m)) \
		$$(find proto -name '*.proto' | LC_ALL=C sort)

## proto-check: fail if the committed generated code is stale
proto-check: proto
	git diff --exit-code -- proto/

## lint: gofmt, go vet and staticcheck
lint: $(TOOLS)/staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
		if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(TOOLS)/staticcheck ./...

clean:
	rm -rf $(BIN)
