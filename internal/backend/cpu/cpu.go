// Package cpu is the host backend: it compiles a generated hook module with
// the system C compiler into a shared object and loads one private copy of
// it per simulated device with dlopen, with record buffers in C memory. The
// hooks it returns are host functions with exactly the signature NCCL's
// device hook has, and they follow the same buffer layout and publication
// protocol as the GPU, so the drain is shared.
package cpu

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "dl.h"
*/
import "C"

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/ncclhooks/ncclhooks/internal/backend"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

// DefaultCC is the compiler used when Compile is given none.
const DefaultCC = "cc"

// DefaultCompileTimeout bounds the C compiler when Compile is given no
// timeout: a generated module compiles in well under a second, and the
// compile runs inside NCCL's getDeviceHook, which must not hang on a
// compiler that does (NCCL_HOOKS_CC is any program the job names).
const DefaultCompileTimeout = time.Minute

// ccFlags build a position-independent shared object. -fno-common makes
// every generated global a real definition that dlsym can find; a call of
// an undeclared function (a generator bug) fails here, not at dlopen.
var ccFlags = []string{"-O2", "-shared", "-fPIC", "-std=gnu11", "-fno-common", "-Werror=implicit-function-declaration"}

const sourceName = "ncclhooks_gen.c"

// Compile compiles m.Source with the C compiler cc (DefaultCC when empty),
// killing it (and whatever it started) when it runs longer than timeout
// (DefaultCompileTimeout when 0). A compiler diagnostic is traced back
// through m.Trace to the hook and the profile position it came from.
func Compile(m *hookgen.Module, cc string, timeout time.Duration) (backend.Compiled, error) {
	path, skipped, err := FindCC(cc)
	if err != nil {
		return nil, fmt.Errorf("cpu backend: %w", err)
	}
	if cc == "" {
		cc = DefaultCC
	}
	if timeout <= 0 {
		timeout = DefaultCompileTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "ncclhooks-cpu-")
	if err != nil {
		return nil, fmt.Errorf("cpu backend: %w", err)
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, sourceName)
	if err := os.WriteFile(src, []byte(m.Source), 0o600); err != nil {
		return nil, fmt.Errorf("cpu backend: %w", err)
	}
	so := filepath.Join(dir, "ncclhooks_gen.so")
	start := time.Now()
	cmd := bounded(ctx, path, append(append([]string{}, ccFlags...), "-o", so, src)...)
	out := &capped{max: maxCompilerOutput}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		var execErr *exec.Error
		switch {
		case errors.As(err, &execErr):
			return nil, fmt.Errorf("cpu backend: C compiler %s cannot be run (%v); install gcc or clang, or set NCCL_HOOKS_CC to a compiler's absolute path", path, execErr.Err)
		case ctx.Err() != nil:
			return nil, fmt.Errorf("cpu backend: C compiler %q still running after %v: killed (NCCL_HOOKS_CC names a compiler that hangs, or the machine is overloaded; raise NCCL_HOOKS_CC_TIMEOUT)", cc, timeout)
		}
		return nil, compileError(m, path, err, out)
	}
	elapsed := time.Since(start)
	image, err := readImage(so)
	if err != nil {
		return nil, fmt.Errorf("cpu backend: C compiler %s exited 0 but %v", path, err)
	}
	info := fmt.Sprintf("%s %s, %dms", path, ccVersion(ctx, path), elapsed.Milliseconds())
	if len(skipped) > 0 {
		info += "; skipped as unsafe: " + strings.Join(skipped, ", ")
	}
	return &compiled{m: m, image: image, info: info}, nil
}

// hostMachine is the ELF machine of this process (EM_NONE: not checked).
var hostMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "ppc64le": elf.EM_PPC64}[runtime.GOARCH]

// maxCompilerOutput bounds what is kept of the compiler's messages (a
// compiler that prints without end must not fill the job's memory); the
// first lines hold the diagnostics that matter.
const maxCompilerOutput = 16 << 10

// maxImage bounds the shared object read back: a generated module is tens
// of KiB.
const maxImage = 64 << 20

// capped keeps the first max bytes written to it and counts the rest.
type capped struct {
	buf  bytes.Buffer
	max  int
	lost int64
}

func (c *capped) Write(p []byte) (int, error) {
	room := max(c.max-c.buf.Len(), 0)
	if room < len(p) {
		c.lost += int64(len(p) - room)
		c.buf.Write(p[:room])
		return len(p), nil
	}
	return c.buf.Write(p)
}

func (c *capped) String() string {
	if c.lost > 0 {
		return c.buf.String() + fmt.Sprintf("\n... (%d more bytes of compiler output left out)", c.lost)
	}
	return c.buf.String()
}

// readImage reads the compiler's shared object, refusing what cannot be
// the generated module: no file, one too large, not an ELF shared object
// of this machine, or one without the entry the hooks are called through
// (a compiler that wrote garbage and exited 0 is refused here, at init,
// not at each device's dlopen).
func readImage(so string) ([]byte, error) {
	f, err := os.Open(so)
	if err != nil {
		return nil, fmt.Errorf("wrote no shared object: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > maxImage {
		return nil, fmt.Errorf("wrote %s of %d bytes: not a generated module (at most %d)", so, st.Size(), maxImage)
	}
	image := make([]byte, st.Size())
	if _, err := io.ReadFull(f, image); err != nil {
		return nil, err
	}
	e, err := elf.NewFile(bytes.NewReader(image))
	if err != nil {
		return nil, fmt.Errorf("wrote something that is not an ELF shared object (%v)", err)
	}
	defer e.Close()
	if e.Type != elf.ET_DYN || (hostMachine != elf.EM_NONE && e.Machine != hostMachine) {
		return nil, fmt.Errorf("wrote an ELF file of type %v for %v, not a shared object for %v", e.Type, e.Machine, hostMachine)
	}
	syms, err := e.DynamicSymbols()
	if err != nil {
		return nil, fmt.Errorf("wrote a shared object without dynamic symbols (%v)", err)
	}
	for _, s := range syms {
		if s.Name == "ncclhooks_entry" && elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Section != elf.SHN_UNDEF {
			return image, nil
		}
	}
	return nil, errors.New("wrote a shared object that does not define the hooks' entry ncclhooks_entry")
}

// bounded is a command that ctx's end kills with everything it started: it
// runs in a process group of its own, and a child that keeps its output
// open (a script's sleep) does not keep Wait waiting.
func bounded(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	return cmd
}

var diagnostic = regexp.MustCompile(`^[^:\n]*` + regexp.QuoteMeta(sourceName) + `:(\d+):(?:(\d+):)? (.*)$`)

// compileError rewrites the compiler's diagnostics so that each names the
// profile position and hook its generated line came from.
func compileError(m *hookgen.Module, cc string, err error, out *capped) error {
	var b strings.Builder
	fmt.Fprintf(&b, "cpu backend: %s failed on the generated hooks (%v)", cc, err)
	if out.lost > 0 {
		fmt.Fprintf(&b, " (its output: %d bytes, the first %d kept)", int64(out.buf.Len())+out.lost, out.buf.Len())
	}
	output := out.String()
	mapped := false
	for _, line := range strings.Split(output, "\n") {
		sub := diagnostic.FindStringSubmatch(line)
		if sub == nil {
			continue
		}
		n, _ := strconv.Atoi(sub[1])
		if span, ok := m.Trace(n); ok {
			fmt.Fprintf(&b, "\n%s: hook %q %s: generated line %d: %s", span.Pos, span.Hook, span.What, n, sub[3])
		} else {
			fmt.Fprintf(&b, "\ngenerated line %d: %s", n, sub[3])
		}
		mapped = true
	}
	if !mapped {
		b.WriteString(":\n" + strings.TrimSpace(output))
	}
	b.WriteString("\n(run `ncclhooks gen` on the profile to see the generated source)")
	return errors.New(b.String())
}

func ccVersion(ctx context.Context, cc string) string {
	out, err := bounded(ctx, cc, "-dumpfullversion", "-dumpversion").Output()
	if err != nil {
		return "(unknown version)"
	}
	return strings.TrimSpace(string(out))
}

type compiled struct {
	m     *hookgen.Module
	image []byte // the shared object, copied to a fresh file for each Load
	info  string
}

func (c *compiled) Module() *hookgen.Module { return c.m }
func (c *compiled) Info() string            { return c.info }

// Load loads a private copy of the module for one simulated device:
// dlopen returns the same handle for the same file, and each device needs
// its own globals (control words, aggregates, context), so every Load opens
// a new copy of the image.
func (c *compiled) Load(ordinal int) (backend.Device, error) {
	f, err := os.CreateTemp("", fmt.Sprintf("ncclhooks-dev%d-*.so", ordinal))
	if err != nil {
		return nil, fmt.Errorf("cpu backend: device %d: %w", ordinal, err)
	}
	path := f.Name()
	defer os.Remove(path) // the mapping outlives the file
	if _, err := f.Write(c.image); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu backend: device %d: %w", ordinal, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("cpu backend: device %d: %w", ordinal, err)
	}
	d := &device{m: c.m, ordinal: ordinal}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var msg [512]C.char
	if C.hk_cpu_open(cpath, &d.mod, &msg[0], C.size_t(len(msg))) != 0 {
		return nil, fmt.Errorf("cpu backend: device %d: loading the compiled hooks: %s", ordinal, C.GoString(&msg[0]))
	}
	if err := d.allocate(); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}
