package hookgen

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// softDivDriver checks the prelude's call-free division and remainder, compiled
// for the host with HK_SOFT_DIV, against the host's IEEE division and C's %,
// bit for bit, over operands of every class: random bit patterns, normal
// operands, quotients near overflow and in the subnormal range, subnormal
// operands, zeros, infinities and NaN. The device runs the same code (with the
// hardware's reciprocal estimate instead of this coarser one).
const softDivDriver = `
#include <stdio.h>
#include <string.h>
static hk_u64 rs = 0x9e3779b97f4a7c15ULL;
static hk_u64 rnd(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs; }
static double pick(int cls) {
  switch (cls) {
  case 0: return hk_bitsd(rnd());                                   /* any bit pattern */
  case 1: return hk_bitsd((rnd() & 0x800fffffffffffffULL) | ((hk_u64)(1023 + (int)(rnd() % 64) - 32) << 52));
  case 2: return hk_bitsd((rnd() & 0x800fffffffffffffULL) | ((hk_u64)(rnd() % 60) << 52)); /* tiny, subnormal */
  case 3: return hk_bitsd((rnd() & 0x800fffffffffffffULL) | ((hk_u64)(2046 - rnd() % 60) << 52)); /* huge */
  case 4: return (double)(long long)(rnd() >> (rnd() % 64));       /* integers, as expr-lang divides them */
  case 5: { static const double sp[] = {0.0, -0.0, 1.0, -1.0, 3.0, 1000.0, 1e300, 1e-300, 4.9e-324, 2.2250738585072014e-308};
            return sp[rnd() % 10]; }
  case 6: return hk_bitsd((rnd() & 1 ? 0x7ff0000000000000ULL : 0x7ff8000000000001ULL) | (rnd() & 0x8000000000000000ULL));
  default: return hk_bitsd((rnd() & 0x800fffffffffffffULL) | 0x3ff0000000000000ULL); /* [1, 2): mantissa edge cases */
  }
}
int main(int argc, char** argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000000, bad = 0;
  for (long i = 0; i < n; i++) {
    const double a = pick((int)(rnd() % 8)), b = pick((int)(rnd() % 8));
    const double want = a / b, got = hk_div(a, b);
    const int same = (want != want) ? (got != got) : (hk_dbits(want) == hk_dbits(got));
    if (!same && bad++ < 10) printf("div %a / %a: got %a want %a\n", a, b, got, want);
    const hk_i64 x = (hk_i64)rnd() >> (rnd() % 64), y = (hk_i64)rnd() >> (rnd() % 64);
    const hk_i64 wm = (y == 0 || y == -1) ? 0 : x % y, gm = hk_mod(x, y);
    if (wm != gm && bad++ < 10) printf("mod %lld %% %lld: got %lld want %lld\n", x, y, gm, wm);
  }
  printf("checked %ld, wrong %ld\n", n, bad);
  return bad != 0;
}
`

func TestSoftDivisionMatchesIEEE(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "softdiv.c")
	text := "#define HK_SOFT_DIV 1\n#include <stdlib.h>\n" + prelude + softDivDriver
	if err := os.WriteFile(src, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "softdiv")
	// -ffp-contract=off: the reference a / b and the algorithm's own products must not be fused.
	if out, err := exec.Command(cc, "-O2", "-ffp-contract=off", "-fno-fast-math", "-o", bin, src, "-lm").CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	n := "3000000"
	if testing.Short() {
		n = "300000"
	}
	out, err := exec.Command(bin, n).CombinedOutput()
	if err != nil {
		t.Fatalf("%s", out)
	}
	if !strings.Contains(string(out), "wrong 0") {
		t.Fatalf("unexpected output: %s", out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}
