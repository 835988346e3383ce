package hooktest

import (
	"strconv"
	"strings"
)

// Chooser makes the random choices of RandomExpr; *rand.Rand is one.
type Chooser interface {
	Intn(n int) int
}

// Kinds of expression RandomExpr generates.
const (
	IntExpr = iota
	FloatExpr
	BoolExpr
)

// intNames are the integer values whose values a test can know exactly
// (the intrinsics smid, clock and globaltimer are left out).
var intNames = []string{"timestamp", "workCounter", "funcId", "channelId", "phase", "cudaDev", "START", "STOP"}

// RandomExpr returns a random well-typed expression of the given kind over
// the device whitelist (arithmetic, / and %, comparisons, logic, ternary,
// abs/min/max and the bit builtins), at most depth operators deep. Both
// operands of min/max and both branches of a ternary have the same kind, so
// the result kind is always known.
func RandomExpr(c Chooser, depth, kind int) string {
	g := exprGen{c}
	var b strings.Builder
	g.gen(&b, depth, kind)
	return b.String()
}

type exprGen struct{ c Chooser }

func (g exprGen) pick(opts ...string) string { return opts[g.c.Intn(len(opts))] }

func (g exprGen) gen(b *strings.Builder, depth, kind int) {
	if depth <= 0 || g.c.Intn(4) == 0 {
		g.leaf(b, kind)
		return
	}
	d := depth - 1
	sub := func(k int) { g.gen(b, d, k) }
	// op writes format with each $ replaced by a subexpression of the
	// next kind.
	op := func(format string, kinds ...int) {
		parts := strings.Split(format, "$")
		for i, p := range parts {
			b.WriteString(p)
			if i < len(kinds) {
				sub(kinds[i])
			}
		}
	}
	switch kind {
	case IntExpr:
		switch g.c.Intn(8) {
		case 0:
			op("($ "+g.pick("+", "-", "*", "%")+" $)", IntExpr, IntExpr)
		case 1:
			op(g.pick("-", "+")+"($)", IntExpr)
		case 2:
			op(g.pick("min", "max")+"($, $)", IntExpr, IntExpr)
		case 3:
			op("abs($)", IntExpr)
		case 4:
			op(g.pick("bitand", "bitor", "bitxor", "bitnand")+"($, $)", IntExpr, IntExpr)
		case 5:
			b.WriteString(g.pick("bitshl", "bitshr", "bitushr") + "(")
			sub(IntExpr)
			// A constant count must lie in 0..63 (config refuses others);
			// larger counts come at run time, where the device defines them.
			if n := g.c.Intn(70); n < 64 {
				b.WriteString(", " + strconv.Itoa(n) + ")")
			} else {
				b.WriteString(", max(channelId, " + strconv.Itoa(n) + "))")
			}
		case 6:
			op("bitnot($)", IntExpr)
		default:
			op("($ ? $ : $)", BoolExpr, IntExpr, IntExpr)
		}
	case FloatExpr:
		switch g.c.Intn(6) {
		case 0:
			op("($ / $)", g.c.Intn(2), g.c.Intn(2))
		case 1:
			op("($ "+g.pick("+", "-", "*")+" $)", FloatExpr, g.c.Intn(2))
		case 2:
			op("-($)", FloatExpr)
		case 3:
			op("abs($)", FloatExpr)
		case 4:
			op(g.pick("min", "max")+"($, $)", FloatExpr, FloatExpr)
		default:
			op("($ ? $ : $)", BoolExpr, FloatExpr, FloatExpr)
		}
	default:
		switch g.c.Intn(5) {
		case 0:
			op("($ "+g.pick("==", "!=", "<", "<=", ">", ">=")+" $)", g.c.Intn(2), g.c.Intn(2))
		case 1:
			op("($ "+g.pick("&&", "||", "and", "or")+" $)", BoolExpr, BoolExpr)
		case 2:
			op(g.pick("!", "not ")+"($)", BoolExpr)
		case 3:
			op("($ "+g.pick("==", "!=")+" $)", BoolExpr, BoolExpr)
		default:
			op("($ ? $ : $)", BoolExpr, BoolExpr, BoolExpr)
		}
	}
}

func (g exprGen) leaf(b *strings.Builder, kind int) {
	switch kind {
	case IntExpr:
		if g.c.Intn(2) == 0 {
			b.WriteString(intNames[g.c.Intn(len(intNames))])
			return
		}
		b.WriteString(g.pick("0", "1", "2", "3", "7", "8", "1000", "65535", "4294967296", "9223372036854775807"))
	case FloatExpr:
		b.WriteString(g.pick("0.5", "1.0", "2.25", "1000.0", "0.001", "3.0e10"))
	default:
		b.WriteString(g.pick("true", "false"))
	}
}
