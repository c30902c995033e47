package robustness

import (
	"encoding/json"
	"os"
	"testing"
	"time"
)

func TestZZDebug(t *testing.T) {
	path := os.Getenv("RB_HISTORY")
	if path == "" {
		t.Skip()
	}
	ops, err := ReadHistory(path + "/history.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var truth Truth
	b, _ := os.ReadFile(path + "/truth.json")
	json.Unmarshal(b, &truth)
	ops, _, _ = Resolve(ops, truth)
	fam := os.Getenv("RB_FAMILY")
	var f []*Op
	for _, op := range ops {
		if op.Family == fam {
			f = append(f, op)
		}
	}
	for _, v := range CheckLinearizable(f, time.Minute).Violations {
		t.Log(v.String())
	}
}
