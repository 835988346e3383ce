package cpu_test

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/expr-lang/expr/vm"

	"github.com/ncclhooks/ncclhooks/internal/backend/cpu/internal/cdrive"
	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
	"github.com/ncclhooks/ncclhooks/internal/hookgen/hooktest"
)

// handwritten expressions aimed at the corners of the translation: integer
// wrap-around, float division, % signs, shifts past the width, mixed
// comparisons, lets that use lets.
var handwritten = []string{
	"workCounter % 7",
	"-funcId % 5",
	"funcId % -3",
	"(timestamp - workCounter) * 3",
	"timestamp / 1000",
	"1 / (workCounter % 3)",
	"(workCounter % 3) / (cudaDev - 2)", // device 2: a run-time 0 (a constant 0 is refused)
	"9223372036854775807 + workCounter",
	"workCounter * 9223372036854775807",
	"-9223372036854775807 - 1 - workCounter",
	"bitshr(-timestamp, 3)",
	"bitushr(-timestamp, 3)",
	"bitshl(workCounter, 62)",
	"bitshl(workCounter, cudaDev * 32)", // run-time counts of 64 (a constant one is refused)
	"bitshr(-workCounter, cudaDev * 32)",
	"bitnot(channelId)",
	"bitnand(funcId, 255)",
	"abs(-5.5)",
	"abs(channelId - 100)",
	"min(funcId, channelId)",
	"max(workCounter / 3, 2.5)",
	"min(1, 2, funcId, channelId)",
	"phase == STOP ? timestamp : workCounter",
	"channelId > 10 && funcId < 100 || phase == START",
	"!(workCounter > 5) and not (funcId == 3)",
	"workCounter / 3 > channelId",
	"channelId == 7.0",
	"cudaDev * 100 + channelId",
	"-(0.0)",
	"abs(-(0.0))",
	"e0 * 2 + e1",
	"e2 > 0 ? e2 * 7 : -e2",
}

// refused reports whether config refuses a generated expression: the
// generator's constants can make a divisor or a shift count constant and out
// of range, which config refuses (the device's results for such values at
// run time are what these tests check).
func refused(src string) bool {
	_, err := hooktest.Expr(src)
	return err != nil
}

// The translator agrees with expr-lang's own evaluation of the same checked
// tree, for every expression and every event. This is the strongest check
// of the translation: ints wrap as Go's int64, / divides as float64, and
// every builtin has Go's semantics.
func TestTranslatorMatchesExprLang(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	srcs := append([]string{}, handwritten...)
	for i := range 400 {
		if src := hooktest.RandomExpr(r, 4, i%3); !refused(src) {
			srcs = append(srcs, src)
		}
	}

	// Hooks of at most 32 lets each, every let recorded as a field.
	type exprCase struct {
		hook, field int
		let         *config.Let
		lets        []*config.Let // the lets in scope, for evaluation
		prog        *vm.Program
	}
	var cases []*exprCase
	var hooks []*config.Hook
	var h *config.Hook
	var lets []*config.Let
	for i, src := range srcs {
		if i%32 == 0 {
			h = hooktest.Hook(fmt.Sprintf("d%d", len(hooks)))
			h.Buffer.Slots = 512
			hooks = append(hooks, h)
			lets = nil
		}
		name := fmt.Sprintf("e%d", len(lets))
		e, err := hooktest.Expr(src, lets...)
		if err != nil {
			t.Fatalf("expression %q does not check: %v", src, err)
		}
		prog, err := hooktest.Program(e, lets...)
		if err != nil {
			t.Fatalf("expression %q does not compile in expr-lang: %v", src, err)
		}
		let := &config.Let{Name: name, Expr: e}
		typ := map[config.Type]config.Type{config.Bool: config.Bool, config.F64: config.F64, config.I64: config.I64}[e.Type]
		h.Fields = append(h.Fields, &config.Field{Name: name, Source: name, Type: typ})
		cases = append(cases, &exprCase{hook: len(hooks) - 1, field: len(h.Fields) - 1, let: let, lets: append([]*config.Let{}, lets...), prog: prog})
		lets = append(lets, let)
		h.Lets = lets
	}
	const device = 2
	m, d := load(t, hooktest.Profile(hooks...), device)

	events := randomEvents(r, 300)
	compared, failed := 0, 0
	for i, ev := range events {
		call(d, ev)
		// expr-lang's values of every let, in order, with the event.
		envs := make([]map[string]any, len(hooks))
		records := make([][]hookgen.Value, len(hooks))
		for hi := range hooks {
			records[hi] = record(t, d, m.Hooks[hi], uint64(i))
		}
		for _, c := range cases {
			env := envs[c.hook]
			if env == nil {
				env = eventEnv(ev, device)
				envs[c.hook] = env
			}
			want, err := vm.Run(c.prog, env)
			if err != nil { // x % 0 fails in expr-lang; the device gives 0 (documented)
				env[c.let.Name] = nil
				continue
			}
			env[c.let.Name] = want
			if hasNil(env, c.lets) {
				continue // depends on a let that failed
			}
			compared++
			if got := records[c.hook][c.field]; !sameValue(got, want) {
				failed++
				if failed <= 10 {
					t.Errorf("%s with %+v:\n  C gives %+v\n  expr-lang gives %v (%T)", c.let.Expr.Source, ev, got, want, want)
				}
			}
		}
	}
	if compared < len(cases)*len(events)*9/10 {
		t.Errorf("only %d of %d evaluations compared", compared, len(cases)*len(events))
	}
	t.Logf("%d expressions x %d events: %d evaluations compared, %d differ", len(cases), len(events), compared, failed)
}

// A when predicate selects exactly the events expr-lang says it does.
func TestWhenMatchesExprLang(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	var hooks []*config.Hook
	var progs []*vm.Program
	for len(hooks) < 40 {
		src := hooktest.RandomExpr(r, 4, hooktest.BoolExpr)
		if refused(src) {
			continue
		}
		e := hooktest.MustExpr(t, src)
		prog, err := hooktest.Program(e)
		if err != nil {
			t.Fatal(err)
		}
		h := hooktest.Hook(fmt.Sprintf("w%d", len(hooks)))
		h.When = e
		h.Aggregates = []*config.Aggregate{{Name: "n", Kind: config.AggCount}}
		hooks = append(hooks, h)
		progs = append(progs, prog)
	}
	m, d := load(t, hooktest.Profile(hooks...), 1)
	events := randomEvents(r, 300)
	want := make([]uint64, len(hooks))
	valid := make([]bool, len(hooks))
	for i := range valid {
		valid[i] = true
	}
	for _, ev := range events {
		call(d, ev)
		for i, p := range progs {
			v, err := vm.Run(p, eventEnv(ev, 1))
			if err != nil {
				valid[i] = false
				continue
			}
			if v.(bool) {
				want[i]++
			}
		}
	}
	agg := readAgg(t, m, d)
	checked := 0
	for i, a := range m.Aggs {
		if !valid[i] {
			continue
		}
		checked++
		if got := agg[a.Offset]; got != want[i] {
			t.Errorf("when %s: %d events matched, expr-lang says %d", hooks[i].When.Source, got, want[i])
		}
	}
	if checked < len(hooks)/2 {
		t.Errorf("only %d of %d predicates evaluated without error", checked, len(hooks))
	}
}

func randomEvents(r *rand.Rand, n int) []cdrive.Event {
	evs := make([]cdrive.Event, n)
	for i := range evs {
		ev := cdrive.Event{Phase: uint8(r.Intn(2)), ChannelID: uint8(r.Intn(256))}
		switch r.Intn(3) { // small values exercise % and comparisons, large ones wrap-around
		case 0:
			ev.Timestamp, ev.WorkCounter, ev.FuncID = uint64(r.Intn(10)), uint64(r.Intn(10)), uint32(r.Intn(10))
		case 1:
			ev.Timestamp, ev.WorkCounter, ev.FuncID = uint64(r.Int63()), uint64(r.Intn(1<<20)), uint32(r.Intn(2000))
		default:
			ev.Timestamp, ev.WorkCounter, ev.FuncID = uint64(r.Int63()), uint64(r.Int63()), r.Uint32()
		}
		evs[i] = ev
	}
	return evs
}

// eventEnv is the expr-lang environment of one event: integers as Go ints.
func eventEnv(ev cdrive.Event, device int) map[string]any {
	env := hooktest.Env()
	env["timestamp"] = int(ev.Timestamp)
	env["workCounter"] = int(ev.WorkCounter)
	env["funcId"] = int(ev.FuncID)
	env["channelId"] = int(ev.ChannelID)
	env["phase"] = int(ev.Phase)
	env["cudaDev"] = device
	return env
}

func hasNil(env map[string]any, lets []*config.Let) bool {
	for _, l := range lets {
		if env[l.Name] == nil {
			return true
		}
	}
	return false
}

func sameValue(got hookgen.Value, want any) bool {
	switch w := want.(type) {
	case bool:
		return got.Type == config.Bool && (got.U == 1) == w
	case int:
		return got.Type == config.I64 && got.I == int64(w)
	case float64:
		if got.Type != config.F64 {
			return false
		}
		if math.IsNaN(w) {
			return math.IsNaN(got.F)
		}
		return math.Float64bits(got.F) == math.Float64bits(w)
	}
	return false
}
