# Build, test and run the aws-node replacement. See README.md.
GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X github.com/aws/amazon-vpc-cni-k8s/pkg/version.Version=$(VERSION)
# grpcnotrace leaves gRPC's request tracing (golang.org/x/net/trace, with
# html/template) out of every binary: nothing here enables it, and aws-cni,
# exec'd for every pod, starts faster without it.
BUILD_TAGS := grpcnotrace
BUILD_DIR := build
BINARIES  := aws-k8s-agent aws-cni egress-cni aws-vpc-cni aws-vpc-cni-init grpc-health-probe sim-node ec2-simulator
PKG_aws-k8s-agent := ./cmd/aws-k8s-agent
PKG_aws-cni           := ./cmd/routed-eni-cni-plugin
PKG_egress-cni        := ./cmd/egress-cni-plugin
PKG_ec2-simulator     := ./cmd/tools/ec2-simulator
PKG_aws-vpc-cni       := ./cmd/aws-vpc-cni
PKG_aws-vpc-cni-init  := ./cmd/aws-vpc-cni-init
PKG_grpc-health-probe := ./cmd/grpc-health-probe
PKG_sim-node      := ./cmd/tools/sim-node

# Arguments for `make run`, e.g. make run RUN_ARGS="-reconcile on -duration 30s -pd"
RUN_ARGS ?=
BENCH    ?= .
BENCHTIME ?= 1s
# make test PKGS=./pkg/ipamd/... TESTFLAGS='-run TestX'; SETUP=no leaves the
# machine alone (no apt installs as root).
PKGS      ?= ./...
TESTFLAGS ?=
SETUP     ?= yes
# go test's own timeout for `make test` (per test binary). go's default of
# 10m killed the end-to-end package on a loaded 2-core machine, whose tests
# run real runtimes one after another. 60m still ends a hung test binary
# with go's goroutine dump rather than leaving it to CI's own limit.
# make test TEST_TIMEOUT=0 disables it.
TEST_TIMEOUT ?= 60m
# Where `go install` puts the analysers scripts/ci/setup.sh installs.
TOOLS_BIN ?= $(or $(shell $(GO) env GOBIN),$(firstword $(subst :, ,$(shell $(GO) env GOPATH)))/bin)

.PHONY: all build test bench bench-report lint check setup run fleet generate-rpc clean $(BINARIES)

all: build

build: $(BINARIES)

$(BINARIES):
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(BUILD_TAGS)' -ldflags '$(LDFLAGS)' -o $(BUILD_DIR)/$@ $(PKG_$@)

## test: unit and integration tests under the race detector; fuzz targets
## run their seed corpora as ordinary tests. As root, first installs what the
## real-kernel and end-to-end tests need and builds the cached real
## components (scripts/ci/setup.sh system components). Prints go
## test's usual output, then one line listing every skipped test with its
## reason, and the counts (scripts/ci/testsummary); go test's exit status.
# E2E_MATRIX: the runtimes the e2e matrix runs on after the full suite,
# which runs on Debian's containerd 1.6 (scripts/ci/e2e-matrix.sh; as root
# only); E2E_MATRIX= leaves the matrix out.
E2E_MATRIX ?= containerd2 crio

test:
	@[ "$(SETUP)" = no ] || GO='$(GO)' scripts/ci/setup.sh system components
	@$(GO) build -o $(BUILD_DIR)/testsummary ./scripts/ci/testsummary
	$(BUILD_DIR)/testsummary $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -json $(PKGS) $(TESTFLAGS)
	@[ -z "$(E2E_MATRIX)" ] || scripts/ci/e2e-matrix.sh $(BUILD_DIR)/testsummary '$(GO)' $(E2E_MATRIX)

## bench: the benchmarks quoted in issue notes.
bench:
	$(GO) test -run='^$$' -bench='$(BENCH)' -benchmem -benchtime=$(BENCHTIME) ./...

## upstream-plugin: build upstream v1.23.1's aws-cni as upstream ships it
## (from the Go module proxy) into build/upstream/aws-cni, for bench-report's
## side-by-side plugin row.
.PHONY: upstream-plugin
upstream-plugin:
	GO='$(GO)' scripts/build-upstream-plugin.sh

## bench-report: issue 16's fast-path table (upstream, ours, goal, met)
## with the load average; BENCH_REPORT_ARGS e.g. "-count 5 -jobs grpc".
bench-report:
	$(GO) run ./scripts/benchreport -go '$(GO)' $(BENCH_REPORT_ARGS)

## lint: gofmt (fails with the diff) and go vet.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; gofmt -d $$out; exit 1; fi
	$(GO) vet ./...

## check: lint, go.mod tidy (direct dependencies not marked indirect,
## nothing missing or unused), then staticcheck (fails on findings not
## listed in scripts/ci/staticcheck.baseline) and a deadcode report (never
## fails). Installs the pinned analysers first (scripts/ci/setup.sh tools).
check: lint
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	@GO='$(GO)' scripts/ci/setup.sh tools
	@scripts/ci/analyse.sh '$(TOOLS_BIN)' ./...

## setup: everything scripts/ci/setup.sh installs (CI calls it first).
setup:
	@GO='$(GO)' scripts/ci/setup.sh

## components: only the cached real components (scripts/ci/components.sh;
## docs/testing.md).
.PHONY: components
components:
	@GO='$(GO)' scripts/ci/components.sh all

## run: the main job: the same pod churn with lost DELs on two simulated
## nodes at once, the pod-IP reconciler off on one and on on the other, then
## a side-by-side (failed pod starts, leaked addresses, EC2 calls).
run:
	$(GO) run ./cmd/tools/sim-node $(RUN_ARGS)

## fleet: 100, 500 and 1,000 simulated nodes (real agents in one process
## per scale, the three at once) against one EC2 account each with EC2's
## request limits: per phase (cluster start, warm-up, steady state,
## scale-down) the EC2 calls by action, throttled and retried, node and
## pod start figures and memory per agent; one report per scale in
## build/fleet-<N>.md. About 20 minutes; e.g.
## make fleet FLEET_SCALES=100 FLEET_ARGS="-steady 2m".
FLEET_ARGS ?= -steady 3m -hour 90s -down 60s
FLEET_SCALES ?= 100 500 1000
fleet:
	@mkdir -p $(BUILD_DIR)
	$(GO) build -o $(BUILD_DIR)/fleet ./cmd/tools/fleet
	@for n in $(FLEET_SCALES); do \
		$(BUILD_DIR)/fleet -nodes $$n -log $(BUILD_DIR)/fleet-$$n-ipamd.log $(FLEET_ARGS) > $(BUILD_DIR)/fleet-$$n.md 2>&1 & \
	done; wait; for n in $(FLEET_SCALES); do cat $(BUILD_DIR)/fleet-$$n.md; done

## generate-rpc: regenerate rpc/*.pb.go (needs protoc, protoc-gen-go,
## protoc-gen-go-grpc on PATH); the generated files are committed.
generate-rpc:
	cd rpc && protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative rpc.proto

clean:
	rm -rf $(BUILD_DIR)

## generate-limits: regenerate pkg/vpc/zz_generated_limits.go from
## misc/instance-limits.tsv; the generated file is committed.
.PHONY: generate-limits
generate-limits:
	$(GO) run ./scripts/gen-limits -in misc/instance-limits.tsv -out pkg/vpc/zz_generated_limits.go

## generate-config: render charts/aws-vpc-cni into config/master/aws-k8s-cni.yaml
## (scripts/generate-config, Helm library); the rendered file is committed.
.PHONY: generate-config
generate-config:
	$(GO) run ./scripts/generate-config -chart charts/aws-vpc-cni -out config/master/aws-k8s-cni.yaml

## image: the aws-node image ($(IMAGE_OUT)) and its init image
## ($(INIT_IMAGE_OUT)) as docker-save tarballs, assembled without a
## container engine by cmd/tools/build-image with the layouts of
## scripts/dockerfiles/Dockerfile.{release,init}.
##
## Bases: by default upstream's, pulled by reference (needs the network and,
## for a private mirror, docker credentials): the eks-distro minimal
## iptables base for aws-node, with the iptables-wrapper alternative
## selected as upstream's Dockerfile does, and the glibc base for init.
## Offline, pass IMAGE_BASE / INIT_IMAGE_BASE = a `docker save` tarball of
## a base, or scratch: such images are labelled and reported NOT
## DEPLOYABLE and `make image-push` refuses them.
##
## aws-cni (./cmd/routed-eni-cni-plugin) is built here with the same
## LDFLAGS as the other binaries, since the plugin and ipamd compare
## version strings. IMAGE_OPTIONAL lists image files that may be left out
## with a warning. The init image carries aws-vpc-cni-init, the core CNI
## plugins (`make plugins`) and scripts/support/aws-cni-support.sh.
##
## IMAGE names the aws-node image (recorded in the tarball, pushed by
## image-push); INIT_IMAGE defaults to IMAGE's repository with -init
## appended, same tag. REGISTRY is the project registry the chart's
## default (values.yaml projectRegistry) points at.
REGISTRY        ?= ghcr.io/amazon-vpc-cni-leakfix
IMAGE           ?= $(REGISTRY)/amazon-k8s-cni:$(VERSION)
INIT_IMAGE      ?=
IMAGE_BASE      ?=
INIT_IMAGE_BASE ?=
IMAGE_OUT       ?= $(BUILD_DIR)/aws-node-image.tar
INIT_IMAGE_OUT  ?= $(BUILD_DIR)/aws-node-init-image.tar
IMAGE_ARCH      ?= amd64
IMAGE_OPTIONAL  ?=
## IMAGE_IPTABLES_ALTERNATIVE is the iptables alternative selected in the
## aws-node base (upstream's iptables-wrapper); empty selects none, for a
## local base without it (e.g. make image IMAGE_BASE=base.tar
## IMAGE_IPTABLES_ALTERNATIVE=).
IMAGE_IPTABLES_ALTERNATIVE ?= /usr/sbin/iptables-wrapper
PLUGINS_DIR     := $(BUILD_DIR)/core-plugins
IMAGE_PKGS      := ./cmd/aws-vpc-cni/... ./cmd/egress-cni-plugin/... ./cmd/aws-vpc-cni-init/... ./cmd/grpc-health-probe/... ./cmd/tools/build-image/... ./pkg/utils/cp/... ./scripts/support/...
BUILD_IMAGE     := GOOS= GOARCH= $(GO) run ./cmd/tools/build-image

.PHONY: image image-test image-push plugins
image: export GOOS = linux
image: export GOARCH = $(IMAGE_ARCH)
image: build plugins
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(BUILD_TAGS)' -ldflags '$(LDFLAGS)' -o $(BUILD_DIR)/aws-cni ./cmd/routed-eni-cni-plugin
	$(BUILD_IMAGE) -kind release -base '$(IMAGE_BASE)' -arch $(IMAGE_ARCH) \
		-iptables-alternative '$(IMAGE_IPTABLES_ALTERNATIVE)' \
		-binaries $(BUILD_DIR) -misc misc -out $(IMAGE_OUT) -to '$(IMAGE)' -optional '$(IMAGE_OPTIONAL)'
	$(BUILD_IMAGE) -kind init -base '$(INIT_IMAGE_BASE)' -arch $(IMAGE_ARCH) \
		-binaries $(BUILD_DIR) -plugins $(PLUGINS_DIR) -out $(INIT_IMAGE_OUT) -to '$(IMAGE)' -init-to '$(INIT_IMAGE)'

## plugins: the core CNI plugins of upstream's init image into
## $(PLUGINS_DIR): every containernetworking/plugins plugin its
## build_linux.sh builds, at the version go.mod pins (its tool block), with
## the module's LICENSE, plus the support script.
plugins: export GOOS = linux
plugins: export GOARCH = $(IMAGE_ARCH)
plugins:
	rm -rf $(PLUGINS_DIR) && mkdir -p $(PLUGINS_DIR)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(PLUGINS_DIR)/ \
		$$($(GO) list tool | grep '^github.com/containernetworking/plugins/plugins/')
	install -m 0644 "$$($(GO) list -m -f '{{.Dir}}' github.com/containernetworking/plugins)/LICENSE" $(PLUGINS_DIR)/LICENSE
	install -m 0755 scripts/support/aws-cni-support.sh $(PLUGINS_DIR)/aws-cni-support.sh

## image-test: the tests of the image's programs (entrypoint, egress
## plugin, init, health probe, assembler, support script), then `make image` and -check of both
## tarballs (layout, modes, entrypoint, working directory, platform; for
## aws-node working iptables/ip6tables, waived only for IMAGE_BASE=scratch).
## Offline: make image-test IMAGE_BASE=scratch INIT_IMAGE_BASE=scratch.
image-test: image
	$(GO) test -race -count=1 $(IMAGE_PKGS)
	$(BUILD_IMAGE) -check $(IMAGE_OUT) -arch $(IMAGE_ARCH) -optional '$(IMAGE_OPTIONAL)' \
		$(if $(filter scratch,$(IMAGE_BASE)),-allow-no-iptables)
	$(BUILD_IMAGE) -kind init -check $(INIT_IMAGE_OUT) -arch $(IMAGE_ARCH)

## image-push: push the tarballs `make image` wrote to IMAGE and INIT_IMAGE
## (each checked first), e.g.
##   make image-push IMAGE=111122223333.dkr.ecr.eu-west-1.amazonaws.com/amazon-k8s-cni:v1.23.1-leakfix.0
## Credentials: the docker config ($$DOCKER_CONFIG or ~/.docker/config.json:
## auths, or credHelpers such as "ecr-login" for docker-credential-ecr-login,
## which reads the usual AWS environment). Not-deployable images (scratch or
## tarball bases) are refused; PUSH_FLAGS=-allow-not-deployable overrides.
PUSH_FLAGS ?=
image-push:
	@for f in $(IMAGE_OUT) $(INIT_IMAGE_OUT); do [ -f $$f ] || { echo "$$f missing: run make image first"; exit 1; }; done
	$(BUILD_IMAGE) -push $(IMAGE_OUT) -to '$(IMAGE)' -arch $(IMAGE_ARCH) -optional '$(IMAGE_OPTIONAL)' $(PUSH_FLAGS)
	$(BUILD_IMAGE) -kind init -push $(INIT_IMAGE_OUT) -to '$(IMAGE)' -init-to '$(INIT_IMAGE)' -arch $(IMAGE_ARCH) $(PUSH_FLAGS)

## e2e: end-to-end tests on a real containerd + runc with the real agent and
## aws-cni against the EC2 simulator (root; skipped otherwise; see test/e2e).
.PHONY: e2e soak
e2e:
	$(GO) test -count=1 -v ./test/e2e/

## soak: TestSoak for DURATION (churn, lost DELs, ipamd kills; a check after
## every 30 s window), e.g. make soak DURATION=10m.
DURATION ?= 10m
soak:
	E2E_SOAK_DURATION=$(DURATION) $(GO) test -count=1 -v -timeout 0 -run '^TestSoak$$' ./test/e2e/
