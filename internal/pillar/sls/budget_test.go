package sls

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// aliasBomb is a small SLS whose aliases copy a 1,000-byte string 10^levels times: the value
// count stays far below maxValues while the JSON grows to about 10^levels KB (finding 5: a
// 10 KB tree became a 100 MB row).
func aliasBomb(levels int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "s: &s %s\n", strings.Repeat("x", 1000))
	prev := "s"
	for i := 1; i <= levels; i++ {
		name := fmt.Sprintf("l%d", i)
		fmt.Fprintf(&b, "%s: &%s [%s]\n", name, name, strings.TrimSuffix(strings.Repeat("*"+prev+", ", 10), ", "))
		prev = name
	}
	return b.String()
}

// A document whose aliases expand past Options.MaxBytes stops the read with a TooLargeError
// naming its file and the line where the limit was passed; the same tree under a larger limit,
// and an alias-free tree as large as the limit, read fine.
func TestReadStopsAtByteBudget(t *testing.T) {
	t.Parallel()
	bomb := aliasBomb(5) // about 100 MB once expanded
	dir := writeTree(t, map[string]string{
		"top.sls":          "base:\n  '*':\n    - common\n    - big\n",
		"common.sls":       "motd: hello\n",
		"big.sls":          bomb,
		"ok/unrelated.sls": "k: v\n",
	})
	const limit = 64 << 10
	_, err := Read(dir, Options{MaxBytes: limit})
	var tooLarge *TooLargeError
	require.True(t, errors.As(err, &tooLarge), "want a TooLargeError, got %v", err)
	require.Equal(t, "big.sls", tooLarge.File)
	require.Equal(t, int64(limit), tooLarge.Limit)
	// The l2 line is where 64 KiB of copies are passed: its ten *l1 copy 10 KB each.
	require.Equal(t, 3, tooLarge.Line, "%v", err)
	require.Contains(t, err.Error(), "big.sls:3:")
	require.Contains(t, err.Error(), fmt.Sprint(limit))

	// Three levels (1 MB) under a 2 MiB limit: read whole.
	dir3 := writeTree(t, map[string]string{"top.sls": "base:\n  '*':\n    - big\n", "big.sls": aliasBomb(3)})
	plan, err := Read(dir3, Options{MaxBytes: 2 << 20})
	require.NoError(t, err)
	require.Len(t, plan.Rows, 1)
	raw, err := json.Marshal(plan.Rows[0].Data)
	require.NoError(t, err)
	require.Greater(t, len(raw), 1_000_000)

	// A plain file as large as the limit: values, keys and structure cost at most what the
	// file spells, so it fits.
	var plain strings.Builder
	for i := 0; plain.Len() < limit-200; i++ {
		fmt.Fprintf(&plain, "key%d: [%q, %d, 1.5, true, null, {a: b}]\n", i, strings.Repeat("v", i%50), i)
	}
	dirPlain := writeTree(t, map[string]string{"top.sls": "base:\n  '*':\n    - plain\n", "plain.sls": plain.String()})
	plan, err = Read(dirPlain, Options{MaxBytes: int64(plain.Len() + len("base:\n  '*':\n    - plain\n"))})
	require.NoError(t, err)
	require.Len(t, plan.Rows, 1)
	require.Empty(t, plan.Unsupported)
}

// The budget is the tree's, not one file's: many files each under the limit whose copies
// together pass it are refused at the file where the sum passes it.
func TestReadByteBudgetSpansFiles(t *testing.T) {
	t.Parallel()
	files := map[string]string{}
	var top strings.Builder
	top.WriteString("base:\n  '*':\n")
	for i := range 20 {
		name := fmt.Sprintf("f%02d", i)
		files[name+".sls"] = aliasBomb(1) // about 11 KB each: the string and ten copies
		fmt.Fprintf(&top, "    - %s\n", name)
	}
	files["top.sls"] = top.String()
	dir := writeTree(t, files)
	_, err := Read(dir, Options{MaxBytes: 100 << 10})
	var tooLarge *TooLargeError
	require.True(t, errors.As(err, &tooLarge), "want a TooLargeError, got %v", err)
	require.Equal(t, "f09.sls", tooLarge.File, "nine files of 11 KB fit in 100 KiB, the tenth does not")

	plan, err := Read(dir, Options{MaxBytes: 1 << 20})
	require.NoError(t, err)
	require.Len(t, plan.Rows, 20)
}

// Copies count too: an SLS listed for many targets becomes a row for each, and an include
// copies the included file into the including one (with key:, under a new key each time), so
// a few bytes of top.sls or include: can name many copies of a large file. Every copy is
// charged to a budget of CopyFactor times Options.MaxBytes; past it the read stops, naming
// the top.sls line of the row or the include line that passed it.
func TestReadByteBudgetCountsCopies(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	big := "v: " + strings.Repeat("x", 30<<10) + "\n" // 30 KB, no aliases

	var top strings.Builder
	top.WriteString("base:\n")
	for i := range 100 {
		fmt.Fprintf(&top, "  web%02d:\n    - big\n", i)
	}
	dir := writeTree(t, map[string]string{"top.sls": top.String(), "big.sls": big})
	_, err := Read(dir, Options{MaxBytes: limit})
	var tooLarge *TooLargeError
	require.True(t, errors.As(err, &tooLarge), "want a TooLargeError, got %v", err)
	require.Equal(t, "top.sls", tooLarge.File)
	// Each row costs 30 KB: CopyFactor×64 KiB = 512 KiB holds 17 rows; the 18th, listed on
	// line 3+2·17 (web17's "- big"), passes it.
	require.Equal(t, 3+2*17, tooLarge.Line, "%v", err)
	require.Contains(t, err.Error(), "copies")
	plan, err := Read(dir, Options{MaxBytes: 4 << 20})
	require.NoError(t, err)
	require.Len(t, plan.Rows, 100)

	var inc strings.Builder
	inc.WriteString("include:\n")
	for i := range 100 {
		fmt.Fprintf(&inc, "  - big: {key: k%d}\n", i)
	}
	dir = writeTree(t, map[string]string{"top.sls": "base:\n  '*':\n    - many\n", "many.sls": inc.String(), "big.sls": big})
	_, err = Read(dir, Options{MaxBytes: limit})
	require.True(t, errors.As(err, &tooLarge), "want a TooLargeError, got %v", err)
	require.Equal(t, "many.sls", tooLarge.File)
	require.Greater(t, tooLarge.Line, 1)
	require.LessOrEqual(t, tooLarge.Line, 20, "%v", err)
}

// A value nested deeper than strata stores (128 levels, the document being level 1) is
// reported at its line with its pointer; 128 levels read fine.
func TestReadReportsTooDeep(t *testing.T) {
	t.Parallel()
	deep := func(levels int) string {
		return strings.Repeat("{a: ", levels-1) + "{leaf: 1}" + strings.Repeat("}", levels-1) + "\n"
	}
	plan := readTree(t, map[string]string{"top.sls": "base:\n  '*':\n    - x\n", "x.sls": "ok: 1\nk: " + deep(127)}, Options{})
	require.Empty(t, plan.Unsupported)
	require.Len(t, plan.Rows, 1)

	plan = readTree(t, map[string]string{"top.sls": "base:\n  '*':\n    - x\n", "x.sls": "ok: 1\nk: " + deep(128)}, Options{})
	require.Len(t, plan.Unsupported, 1)
	require.Equal(t, "x.sls", plan.Unsupported[0].File)
	require.Equal(t, 2, plan.Unsupported[0].Line)
	require.Contains(t, plan.Unsupported[0].Reason, `"/k`+strings.Repeat("/a", 127)+`"`)
	require.Contains(t, plan.Unsupported[0].Reason, "128 levels")
	require.Empty(t, plan.Rows, "the file is left out whole")
}
