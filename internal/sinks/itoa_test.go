package sinks

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

// edgeUints are the values where a decimal formatter goes wrong: each
// digit count's first and last values, the 8-digit chunk boundaries, the
// type limits.
func edgeUints() []uint64 {
	vs := []uint64{0, 1, 9, 10, 11, 19, 99, 100, 101, 999, 1000, 9999, 10000,
		math.MaxUint8, math.MaxUint16, math.MaxUint32, math.MaxUint32 + 1,
		math.MaxInt64, math.MaxInt64 + 1, math.MaxUint64 - 1, math.MaxUint64,
		1796013248705606042} // a nanosecond timestamp
	for p := uint64(10); p <= 1e19; p *= 10 {
		vs = append(vs, p-1, p, p+1, 2*p-1, p/10*9, p/10*9+p/10-1)
		if p == 1e19 {
			break
		}
	}
	return vs
}

func edgeInts() []int64 {
	vs := []int64{math.MinInt64, math.MinInt64 + 1, math.MaxInt64, math.MinInt32, math.MaxInt32, math.MinInt8, math.MaxInt8}
	for _, u := range edgeUints() {
		if u <= math.MaxInt64 {
			vs = append(vs, int64(u), -int64(u))
		}
	}
	return vs
}

// checkUint compares appendUint and putUint with strconv for v: the same
// digits, nothing written before the number, nothing past intRoom.
func checkUint(t *testing.T, v uint64) {
	t.Helper()
	want := strconv.FormatUint(v, 10)
	if got := appendUint([]byte("x"), v); string(got) != "x"+want {
		t.Fatalf("appendUint(%d) = %q, want %q", v, got, "x"+want)
	}
	buf := bytes.Repeat([]byte{'#'}, 3+intRoom) // a store past intRoom panics
	if n := putUint(buf, 3, v); string(buf[:n]) != "###"+want {
		t.Fatalf("putUint(%d) = %q, want %q", v, buf[:n], "###"+want)
	}
}

func checkInt(t *testing.T, v int64) {
	t.Helper()
	want := strconv.FormatInt(v, 10)
	if got := appendInt([]byte("x"), v); string(got) != "x"+want {
		t.Fatalf("appendInt(%d) = %q, want %q", v, got, "x"+want)
	}
	buf := bytes.Repeat([]byte{'#'}, 3+intRoom)
	if n := putInt(buf, 3, v); string(buf[:n]) != "###"+want {
		t.Fatalf("putInt(%d) = %q, want %q", v, buf[:n], "###"+want)
	}
}

func TestIntegersMatchStrconv(t *testing.T) {
	for _, v := range edgeUints() {
		checkUint(t, v)
	}
	for _, v := range edgeInts() {
		checkInt(t, v)
	}
	// Every value below 10^5, and random values of every bit length.
	for v := range uint64(1e5) {
		checkUint(t, v)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1 << 18 {
		u := rng.Uint64() >> rng.IntN(64)
		checkUint(t, u)
		checkInt(t, int64(u))
	}
}

// eightDigits is the core of the formatter: compare it with strconv over
// random values and every lane boundary (x0000, x9999, xx00, xx99).
func TestEightDigits(t *testing.T) {
	check := func(v uint32) {
		var b [8]byte
		le := eightDigits(v)
		for i := range b {
			b[i] = byte(le >> (8 * i))
		}
		if want := strconv.FormatUint(1e8+uint64(v), 10)[1:]; string(b[:]) != want {
			t.Fatalf("eightDigits(%d) = %q, want %q", v, b, want)
		}
	}
	for hi := uint32(0); hi < 1e4; hi += 7 {
		for _, lo := range []uint32{0, 1, 9, 10, 99, 100, 101, 999, 1000, 5000, 9899, 9900, 9990, 9999} {
			check(hi*1e4 + lo)
			check(lo*1e4 + hi)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 1 << 18 {
		check(rng.Uint32N(1e8))
	}
}

func FuzzAppendUint(f *testing.F) {
	for _, v := range edgeUints() {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v uint64) {
		checkUint(t, v)
		checkInt(t, int64(v))
	})
}

// referenceRecordLine is a record line as the sink wrote it before its
// encoder was made fast (strconv for every number, appends all along): the
// fast encoder must write the same bytes.
func referenceRecordLine(r *Record) []byte {
	b := appendString([]byte(`{"type":"record","hook":`), r.Hook.Name)
	b = append(b, `,"device":`...)
	b = strconv.AppendInt(b, int64(r.Device), 10)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, r.Seq, 10)
	hasFunc := false
	for f, v := range r.Values {
		fl := r.Hook.Layout.Fields[f]
		hasFunc = hasFunc || fl.Source == "funcId"
		b = appendKey(b, fl.Name)
		switch {
		case v.Type == config.Bool:
			b = strconv.AppendBool(b, v.U != 0)
		case v.Type == config.F32:
			b = appendFloat(b, v.F, 32)
		case v.Type.IsFloat():
			b = appendFloat(b, v.F, 64)
		case v.Type.IsSigned():
			b = strconv.AppendInt(b, v.I, 10)
		default:
			b = strconv.AppendUint(b, v.U, 10)
		}
	}
	if hasFunc {
		b = appendString(appendKey(b, "func"), r.FuncName)
	}
	return append(b, "}\n"...)
}

// Random records of every field type, on several hooks and devices, in
// runs and interleaved, with function names that change and need escaping:
// the file holds exactly the reference lines.
func TestRecordLinesMatchReference(t *testing.T) {
	j, err := NewJSONL(t.TempDir(), Header{Profile: "p", Host: "h", PID: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Field keys of 16 bytes and more take the copy instead of two words.
	long := hookgen.Layout{Fields: []hookgen.FieldLayout{{Name: "twelve_bytes", Source: "timestamp", Type: config.U64},
		{Name: "thirteen_byte", Source: "workCounter", Type: config.I64}, {Name: "a_rather_longer_field_name", Source: "funcId", Type: config.U32}}}
	hooks := []*hookgen.HookInfo{allTypesHook(), {Name: "plain", Layout: hookgen.Layout{Fields: []hookgen.FieldLayout{{Name: "ts", Source: "timestamp", Type: config.U64}}}},
		{Name: "empty"}, {Name: "long", Layout: long}}
	funcs := []string{"AllReduce_Sum_f32_RING_LL", "", "quote\"back\\slash", "é\x01\xff"}
	rng := rand.New(rand.NewPCG(5, 6))
	var want bytes.Buffer
	for range 200 {
		recs := make([]Record, rng.IntN(300))
		h, dev, fn := hooks[0], 0, funcs[0]
		for i := range recs {
			if rng.IntN(8) == 0 { // a new run
				h, dev, fn = hooks[rng.IntN(len(hooks))], rng.IntN(3)*100, funcs[rng.IntN(len(funcs))]
			}
			// Half the values near the previous one, as timestamps and
			// positions are: they share their high digits.
			near := func(prev uint64) uint64 {
				if rng.IntN(2) == 0 {
					return prev + uint64(rng.IntN(1000))
				}
				return rng.Uint64() >> rng.IntN(64)
			}
			var prev Record
			if i > 0 {
				prev = recs[i-1]
			}
			r := Record{Hook: h, Device: dev, Seq: near(prev.Seq), FuncName: fn}
			for f, fl := range h.Layout.Fields {
				var u uint64
				if f < len(prev.Values) {
					u = near(prev.Values[f].U)
				} else {
					u = near(rng.Uint64())
				}
				v := hookgen.Value{Type: fl.Type, U: u, I: int64(u), F: math.Float64frombits(rng.Uint64())}
				if rng.IntN(2) == 0 {
					v.I = -v.I
				}
				if fl.Type == config.F32 {
					v.F = float64(math.Float32frombits(rng.Uint32()))
				}
				if rng.IntN(4) == 0 {
					v.F = float64(rng.IntN(2000) - 1000)
				}
				r.Values = append(r.Values, v)
			}
			recs[i] = r
			want.Write(referenceRecordLine(&r))
		}
		if err := j.Records(recs); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(j.Path())
	if err != nil {
		t.Fatal(err)
	}
	got := raw[bytes.IndexByte(raw, '\n')+1:] // after the header
	if !bytes.Equal(got, want.Bytes()) {
		gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want.Bytes(), []byte("\n"))
		for i := range min(len(gl), len(wl)) {
			if !bytes.Equal(gl[i], wl[i]) {
				t.Fatalf("record line %d:\n got %s\nwant %s", i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("%d record lines, want %d", len(gl)-1, len(wl)-1)
	}
}

// highDigits reuses the digits above the last eight while they stay the
// same: values that walk across a multiple of 10^8, jump, and come back
// must still read as strconv writes them.
func TestHighDigitsMatchStrconv(t *testing.T) {
	var h highDigits
	rng := rand.New(rand.NewPCG(7, 8))
	vs := []uint64{1e8, 1e8 - 1 + 1e8, 2e8, 1e8, math.MaxUint64, 1e8, 1e16 - 1, 1e16, 1e19, math.MaxUint64 - 1e8}
	v := uint64(1796013248705606042)
	for range 1 << 16 {
		switch rng.IntN(4) {
		case 0:
			v = max(1e8, rng.Uint64()>>rng.IntN(30))
		case 1:
			v = (v/1e8+1)*1e8 - uint64(rng.IntN(3)) // across a multiple
		default:
			v += uint64(rng.IntN(1000))
		}
		vs = append(vs, max(v, 1e8))
	}
	buf := make([]byte, 3+intRoom)
	for _, v := range vs {
		for i := range buf {
			buf[i] = '#'
		}
		if n, want := h.put(buf, 3, v), "###"+strconv.FormatUint(v, 10); string(buf[:n]) != want {
			t.Fatalf("highDigits.put(%d) = %q, want %q", v, buf[:n], want)
		}
	}
}
