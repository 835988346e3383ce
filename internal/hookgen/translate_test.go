package hookgen

import (
	"strings"
	"testing"

	"github.com/expr-lang/expr/ast"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen/hooktest"
)

func translate(e *config.Expr) (cexpr, error) {
	t := &translator{names: baseNames(), funcSets: map[ast.Node]int{}, at: e.Pos}
	for i, fp := range e.FuncPreds {
		t.funcSets[fp.Node] = i
	}
	return t.expr(e.Tree)
}

// Every catalogue value but the function name (name predicates only) has a
// C spelling, and the spelling has the catalogue's kind.
func TestCatalogIsImplemented(t *testing.T) {
	names := baseNames()
	for _, e := range config.Catalog {
		c, ok := names[e.Name]
		if e.Kind == config.KindName {
			if ok {
				t.Errorf("%s has a C value; it may only appear in name predicates", e.Name)
			}
			continue
		}
		if !ok {
			t.Errorf("catalogue entry %s has no C translation", e.Name)
			continue
		}
		if want := map[bool]kind{true: kindBool, false: kindInt}[e.Type == config.Bool]; c.kind != want {
			t.Errorf("%s translates to a %s, want %s", e.Name, c.kind, want)
		}
	}
}

func TestTranslateRefuses(t *testing.T) {
	for src, want := range map[string]string{
		"2 ^ 3":                "exponent is not supported",
		"channelId ** 2":       "exponent is not supported",
		"channelId in [1, 2]":  "Array expression cannot run on the device",
		"(channelId ?? 1) > 0": "operator ?? cannot run on the device",
		"ceil(1.5) > 1":        "function ceil cannot run on the device",
		"len(func) > 1":        "func can only be used in a name predicate",
		"[1, 2][channelId]":    "Member expression cannot run on the device",
	} {
		e, err := hooktest.Expr(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		e.Pos = config.Pos{File: "p.yaml", Line: 4, Col: 11}
		_, err = translate(e)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "p.yaml:4:") {
			t.Errorf("%s: error %v, want p.yaml:4:...: %s", src, err, want)
		}
	}
}

func TestTranslateSpelling(t *testing.T) {
	for src, want := range map[string]string{
		"workCounter % 8 == 0":   "(hk_mod_const(((hk_i64)ev->workCounter), (8LL)) == (0LL))",
		"workCounter % -1":       "hk_mod(((hk_i64)ev->workCounter), hk_neg((1LL)))",
		"funcId % channelId":     "hk_mod(((hk_i64)ev->funcId), ((hk_i64)ev->channelId))",
		"timestamp / 2":          "hk_div(((double)((hk_i64)ev->timestamp)), ((double)(2LL)))",
		"phase == STOP or !true": "((((hk_i64)ev->phase) == (1LL)) || (!(1)))",
		"-channelId + 1.5":       "(((double)hk_neg(((hk_i64)ev->channelId))) + (1.5e+00))",
		`func startsWith "All"`:  "hk_in_funcset(blk, 0, ev->funcId)",
	} {
		c, err := translate(hooktest.MustExpr(t, src))
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if c.code != want {
			t.Errorf("%s:\n got %s\nwant %s", src, c.code, want)
		}
	}
}

func TestCommentSanitises(t *testing.T) {
	for _, s := range []string{"a */ b", "a /* b", "x\n*/y", "**//**/", "ü\x00*/"} {
		c := comment(s)
		if strings.Contains(c, "*/") || strings.Contains(c, "/*") || strings.ContainsAny(c, "\n\r\x00") {
			t.Errorf("comment(%q) = %q", s, c)
		}
	}
}

// byteChooser turns fuzz input into the random choices of RandomExpr.
type byteChooser struct{ data []byte }

func (b *byteChooser) Intn(n int) int {
	if len(b.data) == 0 {
		return 0
	}
	v := int(b.data[0])
	b.data = b.data[1:]
	return v % n
}

// FuzzTranslate: every well-typed expression over the whitelist translates
// without panicking into C with balanced parentheses. (Its semantics are
// checked against expr-lang by the cpu backend's differential test.)
func FuzzTranslate(f *testing.F) {
	f.Add([]byte{0}, uint8(0))
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9}, uint8(1))
	f.Add([]byte("a mixed bag of choices for the generator"), uint8(2))
	f.Add([]byte{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7}, uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, kind uint8) {
		src := hooktest.RandomExpr(&byteChooser{data}, 5, int(kind%3))
		e, err := hooktest.Expr(src)
		if err != nil {
			return // the config validator refuses what does not check
		}
		c, err := translate(e)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		depth := 0
		for _, r := range c.code {
			switch r {
			case '(':
				depth++
			case ')':
				depth--
			}
			if depth < 0 {
				t.Fatalf("%s: unbalanced parentheses in %s", src, c.code)
			}
		}
		if depth != 0 {
			t.Fatalf("%s: unbalanced parentheses in %s", src, c.code)
		}
		if strings.Contains(c.code, "/*") || strings.Contains(c.code, "\n") {
			t.Fatalf("%s: translated code has a comment or newline: %s", src, c.code)
		}
	})
}
