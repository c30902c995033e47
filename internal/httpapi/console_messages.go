package httpapi

import "github.com/stratahq/strata/client"

// onceEach is a page's error as a person reads it, each sentence once: a problem states a
// one-field refusal both as its detail and as its only entry of errors, and a page showing
// both repeated the headline as a bullet (": …" when the entry named no field). The entry
// saying what the headline says is folded into it (its field before it); the other entries
// stay as bullets. The CLI prints problems by the same rule (client.Problem.Lines).
func onceEach(msg string, fields []client.FieldError) (string, []client.FieldError) {
	if msg == "" || len(fields) == 0 {
		return msg, fields
	}
	field, headline, rest := client.Problem{Detail: msg, Errors: fields}.Lines()
	if field != "" {
		headline = field + ": " + headline
	}
	return headline, rest
}
