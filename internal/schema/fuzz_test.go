package schema

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// FuzzOpen: any file, plain or with a zstd or gzip magic, opens and reads
// without a panic; a compressed one hands out whole lines only, and a
// plain one reads back as it is.
func FuzzOpen(f *testing.F) {
	lines := []byte("{\"type\":\"header\",\"format\":1}\n{\"type\":\"record\",\"hook\":\"all\",\"seq\":1}\n")
	f.Add(lines)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(lines)
	zw.Close()
	f.Add(gz.Bytes())
	f.Add(gz.Bytes()[:gz.Len()/2])
	enc, _ := zstd.NewWriter(nil)
	z := enc.EncodeAll(lines, nil)
	f.Add(z)
	f.Add(z[:len(z)-3])
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0})
	// One file, rewritten for every input (the inputs of a process run one
	// at a time): a directory made and removed per input cost more than
	// the read.
	p := filepath.Join(f.TempDir(), "out.jsonl")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := Open(p)
		if err != nil {
			return // a header the decompressor refuses
		}
		defer r.Close()
		got, err := io.ReadAll(io.LimitReader(r, 1<<22))
		if err != nil && len(got) == 0 {
			return
		}
		compressed := bytes.HasPrefix(data, zstdMagic) || bytes.HasPrefix(data, gzipMagic)
		if !compressed && !bytes.Equal(got, data) {
			t.Fatalf("a plain file read back as %q, not %q", got, data)
		}
		if compressed && r.Truncated() && len(got) > 0 && got[len(got)-1] != '\n' {
			t.Fatalf("a cut compressed file handed out part of a line: %q", got)
		}
	})
}
