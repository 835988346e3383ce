# ncclhooks: the plugin library, the CLI, tests, the demo and benchmarks.
# Building needs Go and a C compiler only: no CUDA headers or libraries.

GO       ?= go
BUILD    ?= build
PLUGIN   := $(BUILD)/libnccl-profiler-hooks.so
CLI      := $(BUILD)/ncclhooks
FUZZTIME ?= 100000x

# -z nodelete: NCCL dlcloses the plugin and may load it again; a Go image
# cannot be unloaded (golang/go#11100), so it must stay resident.
PLUGIN_LDFLAGS := -extldflags=-Wl,-z,nodelete

# ncclhooks --version and the plugin's plugin_version (the JSON lines
# header) read the build information; where the go command stamps no VCS
# state (-buildvcs=false, a worktree), this stands in.
GIT_DESCRIBE := $(shell git describe --always --dirty 2>/dev/null)

.PHONY: all build test demo bench fuzz fuzz-long vet golden clean

all: build

build:
	@mkdir -p $(BUILD)
	$(GO) build -buildmode=c-shared -ldflags='$(PLUGIN_LDFLAGS) -X main.gitDescribe=$(GIT_DESCRIBE)' -o $(PLUGIN) ./plugin
	@rm -f $(BUILD)/libnccl-profiler-hooks.h
	$(GO) build -ldflags='-X main.gitDescribe=$(GIT_DESCRIBE)' -o $(CLI) ./cmd/ncclhooks

# The tests load the real plugin (NCCLHOOKS_PLUGIN) and the real CLI
# (NCCLHOOKS_CLI); GPU tests skip cleanly where no GPU is present.
# The packages whose tests race the drain against writers run twice more
# (issue 32: -count=3 in CI), so that a flaky test shows before it lands.
REPEAT_PKGS := ./plugin ./internal/rings ./internal/lifecycle
test: build vet
	NCCLHOOKS_PLUGIN=$(abspath $(PLUGIN)) NCCLHOOKS_CLI=$(abspath $(CLI)) \
		$(GO) test -race -count=1 -timeout 30m ./...
	NCCLHOOKS_PLUGIN=$(abspath $(PLUGIN)) NCCLHOOKS_CLI=$(abspath $(CLI)) \
		$(GO) test -race -count=2 -timeout 30m $(REPEAT_PKGS)
	$(MAKE) --no-print-directory fuzz

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...

# hookgen's golden sources, internal/hookgen/testdata/golden/NAME.cu for each
# examples/NAME.yaml: rewrite them after changing hookgen or an example,
# review the CUDA diff and commit it with the change (go test ./internal/hookgen
# fails while they differ).
golden:
	$(GO) generate ./internal/hookgen

# Every fuzz target runs a bounded number of inputs on top of its seed corpus.
# A count, not a duration: with -fuzztime 10s, go test sometimes reports
# "context deadline exceeded" as a failure when the time runs out under load.
fuzz:
	@$(GO) list -f '{{.ImportPath}} {{.Dir}}' ./... | while read pkg dir; do \
		for t in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/func //'); do \
			echo "fuzz $$pkg $$t ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

# Fuzz at scale (issue 32 item 2): every fuzz target (config parse, expr,
# translate, the record decoder, the device event, the JSON lines reader,
# the host-event descriptors, fatbin, itoa) runs FUZZ_LONG inputs (10 M by
# default: hours per target on 2 cores; a 16-core machine does the set in
# about an hour), then the inputs the fuzzer found interesting are copied
# from the Go cache into each package's testdata/fuzz/<Target>, where every
# later `go test` replays them. A crasher fails the target and is written
# to testdata/fuzz by go test itself.
FUZZ_LONG ?= 10000000x
fuzz-long: build
	@$(GO) list -f '{{.ImportPath}} {{.Dir}}' ./... | while read pkg dir; do \
		for t in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/func //'); do \
			echo "fuzz-long $$pkg $$t ($(FUZZ_LONG))"; \
			NCCLHOOKS_PLUGIN=$(abspath $(PLUGIN)) $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZ_LONG) $$pkg || exit 1; \
			cache="$$($(GO) env GOCACHE)/fuzz/$$pkg/$$t"; \
			if [ -d "$$cache" ]; then mkdir -p $$dir/testdata/fuzz/$$t && cp -n $$cache/* $$dir/testdata/fuzz/$$t/ 2>/dev/null; true; fi; \
		done; \
	done

# The main job: a profile through the harness, on the GPU where one is
# present, else on the cpu backend.
# Every demo run writes a directory of its own (out/demo-<time>), so that
# reports of a run never merge an earlier one's output. stdout holds the
# results; the plugin's log goes to stderr, its INFO lines left out.
DEMO_DIR = out/demo-$(shell date +%Y%m%d-%H%M%S)

demo: build
	@d=$(DEMO_DIR); \
	$(CLI) --quiet run examples/all-events.yaml --out $$d || exit $$?; \
	echo; echo "next:"; \
	printf '  %-56s # %s\n' \
		"$(CLI) report $$d" "p50/p90/p99/max per function and channel, skew, capture" \
		"$(CLI) trace $$d -o $$d/trace.json" "open it at https://ui.perfetto.dev" \
		"$(CLI) gen --hooks examples/all-events.yaml" "the CUDA C that runs inside NCCL's kernels" \
		"$(CLI) funcs $$d" "NCCL's function names by id" \
		"$(CLI) help" "every command"

bench: build
	NCCLHOOKS_PLUGIN=$(abspath $(PLUGIN)) $(GO) test -run '^$$' -bench . -benchtime 2s ./internal/hookgen/ ./internal/rings/ ./internal/sinks/
	$(CLI) bench

clean:
	rm -rf $(BUILD) out
