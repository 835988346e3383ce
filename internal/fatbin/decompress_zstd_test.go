package fatbin

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// One decoder decompresses every zstd entry of a library, a small one
// first and then one several MB larger (as in torch's NCCL wheel, where the
// second failed with "window size exceeded" under a cap taken from the first).
func TestZstdEntriesOfDifferentSizes(t *testing.T) {
	enc, err := zstd.NewWriter(nil, zstd.WithWindowSize(8<<20))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	var d decoder
	defer d.close()
	for _, n := range []int{4 << 10, 6 << 20} {
		plain := make([]byte, n)
		rng.Read(plain[:n/2]) // half random, half zeros: compressible, with far matches
		got, err := d.decompress("zstd", enc.EncodeAll(plain, nil), int64(n))
		if err != nil {
			t.Fatalf("%d B entry: %v", n, err)
		}
		if !bytes.Equal(got, plain) {
			t.Fatalf("%d B entry decompressed wrong", n)
		}
	}
}
