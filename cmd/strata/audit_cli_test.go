package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAuditFollowAndAll (issue 18, item 1): `strata audit --follow -o json` streams records as
// they are written, one JSON object per line with its cursor (for shipping to a SIEM), and
// `--after` resumes after a record; `strata audit --all` exports every record, past the 1,000
// of a page.
func TestAuditFollowAndAll(t *testing.T) {
	t.Parallel()
	c := newCLIEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	follow := exec.CommandContext(ctx, binary, "audit", "--follow", "-o", "json", "--action", "object.")
	follow.Env = append(os.Environ(), c.env...)
	stdout, err := follow.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, follow.Start())
	t.Cleanup(func() { cancel(); _ = follow.Wait() })
	lines := make(chan map[string]any, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil {
				lines <- rec
			}
		}
		close(lines)
	}()
	time.Sleep(500 * time.Millisecond) // the stream starts "now"
	c.run("org", "create", "followed")
	c.run("org", "label", "followed", "env=prod")
	var got []string
	var cursor string
	for len(got) < 2 {
		select {
		case rec, ok := <-lines:
			require.True(t, ok, "the follow ended")
			got = append(got, rec["action"].(string)+" "+rec["target"].(string))
			cursor, _ = rec["cursor"].(string)
			require.NotEmpty(t, rec["requestId"], "records name their request")
		case <-ctx.Done():
			t.Fatalf("only %v arrived", got)
		}
	}
	require.Equal(t, []string{"object.create Org/followed", "object.update Org/followed"}, got)
	require.NotEmpty(t, cursor)

	// Resuming after the first record gives the second again, then nothing older.
	rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
	defer rcancel()
	resume := exec.CommandContext(rctx, binary, "audit", "--follow", "-o", "json", "--action", "object.", "--after", cursor)
	resume.Env = append(os.Environ(), c.env...)
	out, _ := resume.Output()
	require.Empty(t, strings.TrimSpace(string(out)), "nothing after the last record yet")

	// --all: more than one page.
	var sb strings.Builder
	for i := range 1100 {
		fmt.Fprintf(&sb, `{"metadata":{"name":"n%05d"},"spec":{"org":"followed"}}`+"\n", i)
	}
	f := c.write("many.ndjson", sb.String())
	c.run("node", "apply", "-f", f, "-q")
	all := c.run("audit", "--all", "--action", "object.create", "-o", "json")
	var list struct {
		Items []map[string]any `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(all), &list))
	require.Len(t, list.Items, 1101, "every creation: the org and 1,100 nodes")
}
