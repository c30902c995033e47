package tfstate

import (
	"bytes"
	"fmt"
	"testing"
)

// BenchmarkSealOpenState measures the encryption alone for a state of about 30 KB (the size
// BenchmarkStateGetPost in internal/httpapi writes and reads): SealState on a write, OpenState
// on a read, base64 included. docs/benchmarks.md, "Encrypted projects", compares it with the
// whole request.
func BenchmarkSealOpenState(b *testing.B) {
	keys := testKeyring(b, testKey(b))
	var buf bytes.Buffer
	buf.WriteString(`{"version":4,"serial":1,"lineage":"bench","resources":[`)
	for i := range 100 {
		fmt.Fprintf(&buf, `{"mode":"managed","type":"terraform_data","name":"r%d","instances":[{"attributes":{"id":"%08d","input":"%0200d"}}]},`, i, i, i)
	}
	buf.WriteString(`{}]}`)
	plain := buf.Bytes()
	sealed, err := SealState(keys, "p", "w", plain)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("seal", func(b *testing.B) {
		b.SetBytes(int64(len(plain)))
		for range b.N {
			if _, err := SealState(keys, "p", "w", plain); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("open", func(b *testing.B) {
		b.SetBytes(int64(len(plain)))
		for range b.N {
			if _, err := OpenState(keys, "p", "w", sealed); err != nil {
				b.Fatal(err)
			}
		}
	})
}
