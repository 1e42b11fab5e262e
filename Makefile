# art - see README.md. The two set-up commands are `make run` and `make test`.
GO      ?= go
BIN     ?= bin/art
GOFLAGS ?=
export CGO_ENABLED = 1
# art version: the commit and a describe string, when built from a git checkout.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
COMMIT  ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)
LDFLAGS ?= -X main.version=$(VERSION) -X main.commit=$(COMMIT)
# urfave_cli_no_docs leaves urfave/cli's man page and markdown generator
# (and the markdown library's package initialisation) out of bin/art-core: every
# art process paid for it at start-up. make man builds without it.
TAGS    ?= urfave_cli_no_docs

.PHONY: all build run demo test test-short vet fmt-check fuzz bench deps clean man

all: build

## build: compile bin/art (the thin front), bin/art-core (the full art it executes) and the stub of warm daemons' sandboxes started ahead: the three go together
build:
	$(GO) build $(GOFLAGS) -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(dir $(BIN))art-core ./cmd/art
	CGO_ENABLED=0 $(GO) build $(GOFLAGS) -o $(BIN) ./cmd/art-front
	$(GO) build $(GOFLAGS) -o $(dir $(BIN))art-sandbox-stub ./cmd/art-sandbox-stub

## run: install what is missing, build, and run a short demo session
run: deps build demo

demo:
	@scripts/demo.sh $(BIN)

## test: the whole suite (vet, formatting, race-enabled tests)
test: vet fmt-check
	$(GO) test $(GOFLAGS) -race -count=1 -timeout 30m ./...
	@# The race detector slows FUSE round trips several times over, so the
	@# fsx test runs 25,000 operations above, and the random stream test a
	@# quarter of its files; here at full size.
	$(GO) test $(GOFLAGS) -count=1 -timeout 20m -run '^(TestFSX|TestStreamRandomOps)$$' ./overlay

test-short:
	$(GO) test $(GOFLAGS) -short -count=1 ./...

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## fuzz: run each fuzz target for FUZZTIME (default 30s)
FUZZTIME ?= 30s
fuzz:
	$(GO) test ./cas -run '^$$' -fuzz '^FuzzDecodeTree$$' -fuzztime $(FUZZTIME)
	$(GO) test ./cas -run '^$$' -fuzz '^FuzzDecodeManifest$$' -fuzztime $(FUZZTIME)
	$(GO) test ./cas -run '^$$' -fuzz '^FuzzChunker$$' -fuzztime $(FUZZTIME)
	$(GO) test ./journal -run '^$$' -fuzz '^FuzzDecodeEvent$$' -fuzztime $(FUZZTIME)
	$(GO) test ./netpolicy -run '^$$' -fuzz '^FuzzParseRule$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/termtext -run '^$$' -fuzz '^FuzzSafeOutput$$' -fuzztime $(FUZZTIME)
	$(GO) test ./netpolicy -run '^$$' -fuzz '^FuzzCheckSpecial$$' -fuzztime $(FUZZTIME)
	$(GO) test ./remote/s3api -run '^$$' -fuzz '^FuzzListing$$' -fuzztime $(FUZZTIME)
	$(GO) test ./cmd/art-front -run '^$$' -fuzz '^FuzzReply$$' -fuzztime $(FUZZTIME)

## bench: measure art against native tools; writes docs/benchmarks.md
bench:
	$(GO) run ./cmd/bench -out docs/benchmarks.md

## deps: install missing system packages (Debian); needs root or sudo
deps:
	@scripts/deps.sh

## man: generate the man page man/art.1 from the CLI's own definitions
## (an art built without TAGS: bin/art-core leaves the generator out)
man:
	@mkdir -p man
	$(GO) run $(GOFLAGS) ./cmd/art man > man/art.1
	@echo "wrote man/art.1 (read it with: man ./man/art.1)"

clean:
	rm -rf bin man
