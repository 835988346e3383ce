package config

import (
	"fmt"

	"github.com/expr-lang/expr/ast"
)

// WorkPositionsLack are the values a hook with work positions cannot use,
// with why: such a hook reads nothing but the event (its communicator's
// block is host memory holding its regions), and each of these needs state
// on the device or a load from it.
var WorkPositionsLack = map[string]string{
	"cudaDev":  "the device ordinal is in the context block's header, a load",
	"duration": "pairing keeps each START in device memory and loads it at STOP",
	"paired":   "pairing keeps each START in device memory and loads it at STOP",
}

// checkWorkPositions applies the rules of buffer.positions: work. Such a
// hook records every event (a position left unwritten would hold its
// region's drain back until the region wraps, and a region lapped before
// the drain read it could not say which of its lost positions matched),
// reads only the event, comm and the multiprocessor's own registers, and
// either records fields or has aggregates that the drain computes
// (DrainAggregates). Either overflow policy is the drain's to apply: the
// device reads no limit (rings/work.go). Every enabled hook of its profile
// must use work positions too, since the communicator's block is then host
// memory.
func checkWorkPositions(p *Profile, errs *ErrorList) {
	var work, shared *Hook
	for _, h := range p.EnabledHooks() {
		if h.Buffer.Positions != PositionsWork {
			shared = firstHook(shared, h)
			continue
		}
		work = firstHook(work, h)
		at := h.Buffer.PositionsPos
		if len(h.Fields) > 0 && len(h.Aggregates) > 0 {
			errs.add(h.Aggregates[0].Pos, "hook %q: with positions: work, a hook records fields or aggregates work items in the drain, not both: make them two hooks", h.Name)
		}
		if min := RegionChannels * MinSlots; h.Buffer.Slots < min {
			errs.add(at, "hook %q: positions: work splits buffer.slots over NCCL's %d channels: give at least %d slots, not %d", h.Name, RegionChannels, min, h.Buffer.Slots)
		}
		if h.When != nil {
			errs.add(h.When.Pos, "hook %q: positions: work records every event, and a when would leave positions unwritten (a region lapped before the drain read it cannot say which of its lost positions matched): record every event and filter in the report, or use positions: shared", h.Name)
		}
		if h.Sample > 1 {
			errs.add(h.Pos, "hook %q: positions: work records every event, and sample would leave positions unwritten: use positions: shared", h.Name)
		}
		for _, a := range h.Aggregates {
			checkDrainAggregate(h, a, errs)
		}
		if len(h.Aggregates) > 0 && len(h.Fields) == 0 {
			for _, l := range h.Lets {
				errs.add(l.Pos, "hook %q: let %s: the drain aggregates this hook's work items from their timestamps alone, and a let would be computed on the device for nothing: remove it", h.Name, l.Name)
			}
		}
		checkWorkNames(h, errs)
	}
	if work != nil && shared != nil {
		errs.add(shared.Buffer.PositionsPos, "hook %q uses positions: shared, and hook %q (%s) positions: work: every enabled hook of a profile must use work positions, or none", shared.Name, work.Name, work.Buffer.PositionsPos)
	}
}

// checkDrainAggregate applies the rules of an aggregate of a hook with
// work positions, which the drain computes (Hook.DrainAggregates): its
// value is duration (STOP's timestamp less its START's, which the drain
// pairs by position) or nothing, to count work items.
func checkDrainAggregate(h *Hook, a *Aggregate, errs *ErrorList) {
	if a.Value == nil {
		return
	}
	if id, ok := a.Value.Tree.(*ast.IdentifierNode); ok && id.Value == "duration" {
		return
	}
	errs.add(a.Value.Pos, "hook %q: aggregate %q: with positions: work the drain aggregates each work item from its START and STOP records, and its value can be duration, or none to count work items; not %q (record the values in a hook of their own, or use positions: shared)", h.Name, a.Name, a.Value.Source)
}

// firstHook keeps the first hook seen.
func firstHook(first, h *Hook) *Hook {
	if first != nil {
		return first
	}
	return h
}

// checkWorkNames reports every value a work-positions hook's fields use,
// directly or through its lets, that WorkPositionsLack names, and every
// function-name predicate (the function-id sets are in the block).
func checkWorkNames(h *Hook, errs *ErrorList) {
	lets := map[string]*Let{}
	for _, l := range h.Lets {
		lets[l.Name] = l
	}
	seen := map[string]bool{}
	var walk func(x *Expr, where string)
	walk = func(x *Expr, where string) {
		for _, fp := range x.FuncPreds {
			errs.add(fp.Pos, "hook %q: positions: work cannot test function names (in %s): the function-id sets are in the context block; record funcId and filter in the report", h.Name, where)
		}
		tree := x.Tree
		ast.Walk(&tree, identVisitor(func(n *ast.IdentifierNode) {
			if why, ok := WorkPositionsLack[n.Value]; ok {
				errs.add(x.PosAt(n.Location().From), "hook %q: %s (in %s) is not available with positions: work: %s", h.Name, n.Value, where, why)
			}
			if n.Value == "comm" && lets[n.Value] == nil {
				// The device knows only its block's slot, which is reused;
				// the drain writes the index into a comm field.
				errs.add(x.PosAt(n.Location().From), "hook %q: comm (in %s): with positions: work the device knows only the communicator's context block, which a later communicator reuses, and the drain writes its index into the comm field: record comm as a field and compute from it in the report", h.Name, where)
			}
			if l, ok := lets[n.Value]; ok && !seen[l.Name] {
				seen[l.Name] = true
				walk(l.Expr, fmt.Sprintf("let %s", l.Name))
			}
		}))
	}
	for _, f := range h.Fields {
		if why, ok := WorkPositionsLack[f.Source]; ok {
			errs.add(f.Pos, "hook %q: %s (in fields) is not available with positions: work: %s", h.Name, f.Source, why)
		}
		if l, ok := lets[f.Source]; ok && !seen[l.Name] {
			seen[l.Name] = true
			walk(l.Expr, fmt.Sprintf("let %s", l.Name))
		}
	}
	// A let no field uses is still generated: it may not need what the
	// block lacks either.
	for _, l := range h.Lets {
		if !seen[l.Name] {
			seen[l.Name] = true
			walk(l.Expr, fmt.Sprintf("let %s", l.Name))
		}
	}
}
