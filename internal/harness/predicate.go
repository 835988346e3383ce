package harness

// predicate.go evaluates a hook's predicate on the host, to count the events it matches.

import (
	"fmt"
	"maps"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"

	"github.com/ncclhooks/ncclhooks/internal/config"
)

// compilePredicate compiles the hook's sample and when with expr-lang itself,
// independently of the generated C. nil, nil: the predicate uses values only
// the device knows (intrinsics, derived fields), so it cannot be checked here.
func compilePredicate(h *config.Hook) (*vm.Program, error) {
	src := "true"
	if h.When != nil {
		src = h.When.Source
		tree := h.When.Tree
		usable := true
		ast.Walk(&tree, identVisitor(func(name string) {
			e, ok := config.Lookup(name)
			_, isConst := config.Constants[name]
			if !isConst && name != "comm" && (!ok || (e.Kind != config.KindEvent && e.Kind != config.KindName)) {
				usable = false
			}
		}))
		if !usable {
			return nil, nil
		}
	}
	return expr.Compile(src, expr.Env(predicateEnv(Event{})), expr.AsBool())
}

func predicateEnv(e Event) map[string]any {
	env := map[string]any{
		"timestamp": e.Timestamp, "workCounter": e.WorkCounter, "funcId": e.FuncID,
		"channelId": e.ChannelID, "phase": e.Phase, "func": FuncName(e.FuncID), "comm": e.Comm,
	}
	maps.Copy(env, constants)
	return env
}

// constants are the profile's named constants (START, STOP) for expr-lang.
var constants = func() map[string]any {
	m := map[string]any{}
	for name, v := range config.Constants {
		m[name] = v
	}
	return m
}()

func countMatches(h *config.Hook, pred *vm.Program, evs []Event) (int, error) {
	n := 0
	for _, e := range evs {
		if h.Sample > 1 && e.WorkCounter%uint64(h.Sample) != 0 {
			continue
		}
		v, err := expr.Run(pred, predicateEnv(e))
		if err != nil {
			return 0, fmt.Errorf("evaluating when for %+v: %v", e, err)
		}
		if v.(bool) {
			n++
		}
	}
	return n, nil
}

// identVisitor calls f for every identifier of a tree.
type identVisitor func(name string)

func (f identVisitor) Visit(n *ast.Node) {
	if id, ok := (*n).(*ast.IdentifierNode); ok {
		f(id.Value)
	}
}
