# Build, test and run the aws-node replacement. See README.md.
GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X github.com/aws/amazon-vpc-cni-k8s/pkg/version.Version=$(VERSION)
BUILD_DIR := build
BINARIES  := aws-k8s-agent sim-node
PKG_aws-k8s-agent := ./cmd/aws-k8s-agent
PKG_sim-node      := ./cmd/tools/sim-node

# Arguments for `make run`, e.g. make run RUN_ARGS="-duration 30s -pd"
RUN_ARGS ?=
BENCH    ?= .
BENCHTIME ?= 1s

.PHONY: all build test bench lint run generate-rpc clean $(BINARIES)

all: build

build: $(BINARIES)

$(BINARIES):
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BUILD_DIR)/$@ $(PKG_$@)

## test: unit and integration tests under the race detector; fuzz targets
## run their seed corpora as ordinary tests.
test:
	$(GO) test -race -count=1 ./...

## bench: the benchmarks quoted in issue notes.
bench:
	$(GO) test -run='^$$' -bench='$(BENCH)' -benchmem -benchtime=$(BENCHTIME) ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

## run: the main job, a simulated node with pod churn and lost DELs.
run:
	$(GO) run ./cmd/tools/sim-node $(RUN_ARGS)

## generate-rpc: regenerate rpc/*.pb.go (needs protoc, protoc-gen-go,
## protoc-gen-go-grpc on PATH); the generated files are committed.
generate-rpc:
	cd rpc && protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative rpc.proto

clean:
	rm -rf $(BUILD_DIR)

## generate-limits: regenerate pkg/vpc/limits_generated.go from
## misc/instance-limits.tsv; the generated file is committed.
.PHONY: generate-limits
generate-limits:
	$(GO) run ./scripts/gen-limits -in misc/instance-limits.tsv -out pkg/vpc/limits_generated.go
