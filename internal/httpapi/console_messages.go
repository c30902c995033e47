package httpapi

import (
	"fmt"
	"strings"

	"github.com/stratahq/strata/api"
)

// onceEach is a page's error as a person reads it, each sentence once: a problem states a
// one-field refusal both as its detail and as its only entry of errors, and a page showing
// both repeated the headline as a bullet (": …" when the entry named no field). The entry
// saying what the headline says is folded into it (its field before it); the other entries
// stay as bullets. The CLI prints problems by the same rule (api.Problem.Lines).
func onceEach(msg string, fields []api.FieldError) (string, []api.FieldError) {
	if msg == "" || len(fields) == 0 {
		return msg, fields
	}
	field, headline, rest := api.Problem{Detail: msg, Errors: fields}.Lines()
	if field != "" {
		headline = field + ": " + headline
	}
	return headline, rest
}

// earlierFindings is what a kind report's table shows of the findings an earlier registration
// decided (Earlier): nothing when there are none, else one line — "2 earlier findings decided
// since revision 1" — as the CLI folds them, so a report asks each question once, in the
// revision that made the change. The findings themselves stay in the API's report.
func earlierFindings(fs []api.KindFinding) string {
	n := 0
	var since []string
	seen := map[int]bool{}
	for _, f := range fs {
		if !f.Earlier {
			continue
		}
		n++
		if !seen[f.Against] {
			seen[f.Against] = true
			since = append(since, fmt.Sprint(f.Against))
		}
	}
	switch {
	case n == 0:
		return ""
	case n == 1:
		return "1 earlier finding decided since revision " + since[0]
	case len(since) == 1:
		return fmt.Sprintf("%d earlier findings decided since revision %s", n, since[0])
	}
	return fmt.Sprintf("%d earlier findings decided since revisions %s", n, strings.Join(since, ", "))
}
