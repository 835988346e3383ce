// Package testbuild gives end-to-end tests the real artefacts: the plugin
// library and the CLI as make build produces them (NCCLHOOKS_PLUGIN,
// NCCLHOOKS_CLI), or built into a temporary directory when a test runs
// outside make.
package testbuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// PluginLDFLAGS links the plugin as the Makefile does: -z nodelete keeps
// the Go image resident when NCCL dlcloses it.
const PluginLDFLAGS = "-extldflags=-Wl,-z,nodelete"

// root is the module root, found from this file's location.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Plugin returns the path of libnccl-profiler-hooks.so: $NCCLHOOKS_PLUGIN,
// or a fresh build in dir.
func Plugin(dir string) (string, error) {
	if p := os.Getenv("NCCLHOOKS_PLUGIN"); p != "" {
		return p, nil
	}
	out := filepath.Join(dir, "libnccl-profiler-hooks.so")
	return out, goBuild("-buildmode=c-shared", "-ldflags="+PluginLDFLAGS, "-o", out, "./plugin")
}

// CLI returns the path of the ncclhooks binary: $NCCLHOOKS_CLI, or a fresh
// build in dir next to a fresh plugin (the CLI loads the plugin beside it).
func CLI(dir string) (string, error) {
	if p := os.Getenv("NCCLHOOKS_CLI"); p != "" {
		return p, nil
	}
	if err := goBuild("-buildmode=c-shared", "-ldflags="+PluginLDFLAGS, "-o", filepath.Join(dir, "libnccl-profiler-hooks.so"), "./plugin"); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "ncclhooks")
	return out, goBuild("-o", out, "./cmd/ncclhooks")
}

func goBuild(args ...string) error {
	cmd := exec.Command("go", append([]string{"build"}, args...)...)
	cmd.Dir = root()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %v: %v\n%s", args, err, out)
	}
	return nil
}

// Main runs a package's tests after setup has built what they need into a
// temporary directory, removed afterwards. Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testbuild.Main(m, func(dir string) (err error) { ... })) }
//
// A fuzz worker (a process go test -fuzz starts, and restarts, to run the
// fuzz target's inputs) runs no setup: it runs only the fuzz function, and
// a plugin build per worker start cost about 12 s on 2 cores.
func Main(m interface{ Run() int }, setup func(dir string) error) int {
	if fuzzWorker(os.Args[1:]) {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "ncclhooks-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := setup(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// fuzzWorker reports whether args hold go test's -test.fuzzworker flag.
func fuzzWorker(args []string) bool {
	for _, a := range args {
		if a == "-test.fuzzworker" || a == "-test.fuzzworker=true" || a == "--test.fuzzworker" {
			return true
		}
	}
	return false
}
