package hookgen

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

// Names in the generated source. Profile text never becomes code (it stays
// in sanitised comments); the only identifiers derived from it are the hook
// functions, named so that any name gives a valid C identifier and no two
// hooks share one.

// Hook functions: hookFuncPrefix+NAME for a hook whose name can be used as
// it is ("latency" gives hk_hook_latency); for any other name, the name's
// bytes in hex after mangledFuncPrefix ("a-b" gives hk_hookx_612d62); for a
// name that an earlier hook already has, the hook's index and the hex after
// repeatFuncPrefix ("h" again at index 2 gives hk_hookd2_68). The three
// prefixes differ at their eighth character ('_', 'x', 'd'), so the three
// kinds never meet; within each the name (and index) can be read back, so
// no two hooks share a function. No other generated identifier starts with
// hk_hook_, hk_hookx or hk_hookd (hk_hookbuf_t does not), and none of these
// names holds "__", which C++ reserves.
const (
	hookFuncPrefix    = "hk_hook_"
	mangledFuncPrefix = "hk_hookx_"
	repeatFuncPrefix  = "hk_hookd"
)

// hookFuncs returns the C function of each hook, by index. Config requires
// hook names to be unique C identifiers, so for a loaded profile every hook
// gets hookFuncPrefix+NAME; a hand-built profile may hold any names, and
// repeats. The result depends only on the names and their order.
func hookFuncs(hooks []*HookInfo) []string {
	fns := make([]string, len(hooks))
	seen := map[string]bool{}
	for i, h := range hooks {
		fn := hookFunc(h.Name)
		if seen[fn] {
			fn = fmt.Sprintf("%s%d_%x", repeatFuncPrefix, h.Index, h.Name)
		}
		seen[fn] = true
		fns[i] = fn
	}
	return fns
}

// hookFunc is the C function of a hook named name: a C identifier that
// neither starts with '_' nor holds "__" (either would give a name with a
// double underscore) is used as it is, any other name in hex.
func hookFunc(name string) string {
	if cIdent.MatchString(name) && !strings.HasPrefix(name, "_") && !strings.Contains(name, "__") {
		return hookFuncPrefix + name
	}
	return fmt.Sprintf("%s%x", mangledFuncPrefix, name)
}

// sourcePositions writes profile positions into the generated source's
// comments relative to the top-level profile: a file inside the top-level
// profile's directory by its slash-separated path from there
// ("latency.yaml", "common/base.yaml"), any other file (an include given
// with ".." or as an absolute path) by its base name. So the source, and
// the GPU compile-cache key made from it, do not change when the profile
// tree moves or is loaded from another working directory. Diagnostics keep
// the positions as loaded (LineSpan.Pos, the refusals), which name the file
// the user can open.
type sourcePositions struct {
	root string // absolute directory of the top-level profile; "" if unknown
}

func newSourcePositions(p *config.Profile) sourcePositions {
	top := topFile(p)
	if top == "" {
		return sourcePositions{}
	}
	root, err := filepath.Abs(filepath.Dir(top))
	if err != nil {
		return sourcePositions{}
	}
	return sourcePositions{root: root}
}

// topFile is the path of the top-level profile as it was loaded.
func topFile(p *config.Profile) string {
	if p.File != "" {
		return p.File
	}
	return p.Pos.File
}

// file is how file is named in the source.
func (s sourcePositions) file(file string) string {
	if file == "" {
		return ""
	}
	if s.root != "" {
		if abs, err := filepath.Abs(file); err == nil {
			if rel, err := filepath.Rel(s.root, abs); err == nil && filepath.IsLocal(rel) {
				return filepath.ToSlash(rel)
			}
		}
	}
	return filepath.Base(file)
}

// pos is pos as the source's comments write it, sanitised for a comment.
func (s sourcePositions) pos(pos config.Pos) string {
	pos.File = s.file(pos.File)
	return comment(pos.String())
}
