package gpu

// The hooks Compile leaves out of a module because they could fault the
// kernel calling them, and the error when none is left.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

// Refusal is a hook left out because it could fault the kernel calling it.
type Refusal struct {
	Hook string
	Pos  config.Pos // the hook's position in the profile
	Why  string     // what it needs, against the limits
}

func (r Refusal) String() string {
	return fmt.Sprintf("%s: hook %q cannot be called safely from NCCL's kernels: %s", r.Pos, r.Hook, r.Why)
}

// UnsafeModuleError is a profile none of whose hooks can be called safely.
type UnsafeModuleError struct {
	Arch    string
	Refused []Refusal
	Whole   error // the whole module's check, when no single hook was to blame
}

func (e *UnsafeModuleError) Error() string {
	var lines []string
	for _, r := range e.Refused {
		lines = append(lines, "  "+r.String())
	}
	if len(lines) == 0 && e.Whole != nil {
		lines = append(lines, "  the hooks together: "+e.Whole.Error())
	}
	return fmt.Sprintf("gpu backend: the profile's hook module for %s could fault NCCL's kernels, so it is not handed to NCCL "+
		"(simplify the hook: fewer fields, lets or aggregates; or split it into several hooks):\n%s", e.Arch, strings.Join(lines, "\n"))
}

// withoutUnsafeHooks builds each hook alone to find the ones to blame, then
// the module without them.
func (c *Compiled) withoutUnsafeHooks(arch string, compile compileFunc, whole *unsafeBuild) (*Compiled, error) {
	p := c.mod.Profile
	var refused []Refusal
	for _, h := range p.EnabledHooks() {
		m, err := hookgen.Generate(withHooks(p, func(x *config.Hook) bool { return x == h }))
		if err != nil {
			return nil, err
		}
		one := newCompiled(m, c.lib, c.opt)
		var u *unsafeBuild
		if _, err := one.imagesFor(arch, compile); errors.As(err, &u) {
			refused = append(refused, Refusal{Hook: h.Name, Pos: h.Pos, Why: u.check.Error()})
		} else if err != nil {
			return nil, err
		}
	}
	if len(refused) == 0 || len(refused) == len(p.EnabledHooks()) {
		return nil, &UnsafeModuleError{Arch: arch, Refused: refused, Whole: whole.check}
	}
	out := map[string]bool{}
	for _, r := range refused {
		out[r.Hook] = true
	}
	m, err := hookgen.Generate(withHooks(p, func(x *config.Hook) bool { return !out[x.Name] }))
	if err != nil {
		return nil, err
	}
	rest := newCompiled(m, c.lib, c.opt)
	if _, err := rest.imagesFor(arch, compile); err != nil {
		var u *unsafeBuild
		if errors.As(err, &u) {
			return nil, &UnsafeModuleError{Arch: arch, Refused: refused, Whole: u.check}
		}
		return nil, err
	}
	rest.refused = refused
	return rest, nil
}

// withHooks is p with only the enabled hooks keep accepts still enabled.
func withHooks(p *config.Profile, keep func(*config.Hook) bool) *config.Profile {
	q := *p
	q.Hooks = nil
	for _, h := range p.Hooks {
		hc := *h
		hc.Enabled = h.Enabled && keep(h)
		q.Hooks = append(q.Hooks, &hc)
	}
	return &q
}

// Refused lists the hooks left out of Module because they could fault the
// kernel calling them.
func (c *Compiled) Refused() []Refusal { return c.refused }

// unsafeBuild: every register cap gave a module that could fault its caller;
// check is the verdict at the budget itself.
type unsafeBuild struct {
	res   Resources
	check error
}

func (u *unsafeBuild) Error() string { return "gpu backend: hook module: " + u.check.Error() }
