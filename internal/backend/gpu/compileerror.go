package gpu

// NVRTC's diagnostics on a generated module, traced back to the profile.

import (
	"fmt"
	"strings"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/cuda"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

// Diag is one compiler diagnostic traced back to the profile.
type Diag struct {
	Pos  config.Pos // the profile position the generated line came from (zero if none)
	Hook string     // hook name ("" for prelude or module-level code)
	What string     // the generating construct: "when", "field fn", ...
	Line int        // line in the generated source (ncclhooks gen shows it)
	Kind string     // "error", "warning", ...
	Msg  string
}

func (d Diag) String() string {
	gen := fmt.Sprintf("generated line %d", d.Line)
	if d.Pos.File == "" {
		return fmt.Sprintf("%s: %s: %s: %s", SourceName, gen, d.Kind, d.Msg)
	}
	return fmt.Sprintf("%s: hook %q (%s): %s: %s [%s]", d.Pos, d.Hook, d.What, d.Kind, d.Msg, gen)
}

// CompileError is an NVRTC failure on a generated module, traced back to
// the profile.
type CompileError struct {
	Arch  string
	Diags []Diag
	Log   string // NVRTC's full log
}

func (e *CompileError) Error() string {
	var lines []string
	for _, d := range e.Diags {
		if strings.HasSuffix(d.Kind, "error") {
			lines = append(lines, "  "+d.String())
		}
	}
	if len(lines) == 0 {
		return fmt.Sprintf("gpu backend: NVRTC failed to compile the profile for %s:\n%s", e.Arch, strings.TrimSpace(e.Log))
	}
	return fmt.Sprintf("gpu backend: NVRTC failed to compile the profile for %s (see ncclhooks gen for the generated source):\n%s",
		e.Arch, strings.Join(lines, "\n"))
}

func traceError(m *hookgen.Module, arch string, ce *cuda.CompileError) *CompileError {
	e := &CompileError{Arch: arch, Log: ce.Log}
	for _, l := range ce.Lines {
		d := Diag{Line: l.Line, Kind: l.Kind, Msg: l.Msg}
		if span, ok := m.Trace(l.Line); ok {
			d.Pos, d.Hook, d.What = span.Pos, span.Hook, span.What
		}
		e.Diags = append(e.Diags, d)
	}
	return e
}
