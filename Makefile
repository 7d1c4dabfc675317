# Build, test and run the aws-node replacement. See README.md.
GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X github.com/aws/amazon-vpc-cni-k8s/pkg/version.Version=$(VERSION)
BUILD_DIR := build
BINARIES  := aws-k8s-agent aws-cni aws-vpc-cni aws-vpc-cni-init grpc-health-probe sim-node ec2-simulator
PKG_aws-k8s-agent := ./cmd/aws-k8s-agent
PKG_aws-cni           := ./cmd/routed-eni-cni-plugin
PKG_ec2-simulator     := ./cmd/tools/ec2-simulator
PKG_aws-vpc-cni       := ./cmd/aws-vpc-cni
PKG_aws-vpc-cni-init  := ./cmd/aws-vpc-cni-init
PKG_grpc-health-probe := ./cmd/grpc-health-probe
PKG_sim-node      := ./cmd/tools/sim-node

# Arguments for `make run`, e.g. make run RUN_ARGS="-duration 30s -pd"
RUN_ARGS ?=
BENCH    ?= .
BENCHTIME ?= 1s
# make test PKGS=./pkg/ipamd/... TESTFLAGS='-run TestX'; SETUP=no leaves the
# machine alone (no apt installs as root).
PKGS      ?= ./...
TESTFLAGS ?=
SETUP     ?= yes
# Where `go install` puts the analysers scripts/ci/setup.sh installs.
TOOLS_BIN ?= $(or $(shell $(GO) env GOBIN),$(firstword $(subst :, ,$(shell $(GO) env GOPATH)))/bin)

.PHONY: all build test bench lint check setup run generate-rpc clean $(BINARIES)

all: build

build: $(BINARIES)

$(BINARIES):
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BUILD_DIR)/$@ $(PKG_$@)

## test: unit and integration tests under the race detector; fuzz targets
## run their seed corpora as ordinary tests. As root, first installs what the
## real-kernel and end-to-end tests need (scripts/ci/setup.sh). Prints go
## test's usual output, then one line listing every skipped test with its
## reason, and the counts (scripts/ci/testsummary); go test's exit status.
test:
	@[ "$(SETUP)" = no ] || GO='$(GO)' scripts/ci/setup.sh system
	@$(GO) build -o $(BUILD_DIR)/testsummary ./scripts/ci/testsummary
	$(BUILD_DIR)/testsummary $(GO) test -race -count=1 -json $(PKGS) $(TESTFLAGS)

## bench: the benchmarks quoted in issue notes.
bench:
	$(GO) test -run='^$$' -bench='$(BENCH)' -benchmem -benchtime=$(BENCHTIME) ./...

## lint: gofmt (fails with the diff) and go vet.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; gofmt -d $$out; exit 1; fi
	$(GO) vet ./...

## check: lint, then staticcheck (fails on findings not listed in
## scripts/ci/staticcheck.baseline) and a deadcode report (never fails).
## Installs the pinned analysers first (scripts/ci/setup.sh tools).
check: lint
	@GO='$(GO)' scripts/ci/setup.sh tools
	@scripts/ci/analyse.sh '$(TOOLS_BIN)' ./...

## setup: everything scripts/ci/setup.sh installs (CI calls it first).
setup:
	@GO='$(GO)' scripts/ci/setup.sh

## run: the main job, a simulated node with pod churn and lost DELs.
run:
	$(GO) run ./cmd/tools/sim-node $(RUN_ARGS)

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

## image: the aws-node image as a docker-save tarball ($(IMAGE_OUT)),
## assembled without a container engine by cmd/tools/build-image with the
## layout of scripts/dockerfiles/Dockerfile.release. IMAGE_BASE is "scratch"
## or a base image tarball (e.g. `docker save` of the eks-distro iptables
## base). aws-cni (./cmd/routed-eni-cni-plugin) is built here with the same
## LDFLAGS as the other binaries, since the plugin and ipamd compare
## version strings. IMAGE_OPTIONAL lists image files that may be left out
## with a warning (e.g. IMAGE_OPTIONAL=aws-cni while the plugin is broken).
IMAGE_BASE     ?= scratch
IMAGE_TAG      ?= amazon/amazon-k8s-cni:$(VERSION)
IMAGE_OUT      ?= $(BUILD_DIR)/aws-node-image.tar
IMAGE_ARCH     ?= amd64
IMAGE_OPTIONAL ?=
IMAGE_PKGS     := ./cmd/aws-vpc-cni/... ./cmd/aws-vpc-cni-init/... ./cmd/grpc-health-probe/... ./cmd/tools/build-image/... ./pkg/utils/cp/...

.PHONY: image image-test
image: export GOOS = linux
image: export GOARCH = $(IMAGE_ARCH)
image: build
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BUILD_DIR)/aws-cni ./cmd/routed-eni-cni-plugin
	GOOS= GOARCH= $(GO) run ./cmd/tools/build-image -kind release -base $(IMAGE_BASE) -arch $(IMAGE_ARCH) \
		-binaries $(BUILD_DIR) -misc misc -out $(IMAGE_OUT) -tag $(IMAGE_TAG) -optional '$(IMAGE_OPTIONAL)'

## image-test: the tests of the image's programs (entrypoint, init, health
## probe, assembler), then `make image` and a check of the tarball's layout,
## modes, entrypoint, working directory and platform.
image-test: image
	$(GO) test -race -count=1 $(IMAGE_PKGS)
	$(GO) run ./cmd/tools/build-image -check $(IMAGE_OUT) -arch $(IMAGE_ARCH) -optional '$(IMAGE_OPTIONAL)'

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
