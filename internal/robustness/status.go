package robustness

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
)

// Classify turns an HTTP answer into an outcome, or a violation when the status is not one
// strata may give a well-formed request (issue 30, item 4): 2xx is OK; 404, 409, 412, 422
// and 423 are refusals the models decide on; a 503 is a refusal unless its problem says
// "outcome": "unknown" (strata promises that every other 503 wrote nothing, and the model
// then holds it to that); a 504 and a transport error (err != nil) are unknown outcomes,
// except a failure to connect, which sent nothing.
// Anything else — a 500, a 502, a 400 for a request the harness built correctly — is a
// violation by itself.
func Classify(status int, body []byte, err error) (Outcome, string) {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return Failed, "" // never connected: the request was not sent
	}
	if err != nil {
		return Unknown, ""
	}
	switch {
	case status >= 200 && status < 300:
		return OK, ""
	case status == 404, status == 409, status == 412, status == 422, status == 423:
		return Failed, ""
	case status == 503:
		var p struct {
			Outcome string `json:"outcome"`
		}
		if json.Unmarshal(body, &p) == nil && p.Outcome == "unknown" {
			return Unknown, ""
		}
		return Failed, ""
	case status == 504:
		return Unknown, ""
	}
	return Unknown, fmt.Sprintf("status %d is not an answer strata may give: %s", status, truncate(body, 300))
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
