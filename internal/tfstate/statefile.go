package tfstate

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"github.com/stratahq/strata/internal/fault"
	"io"
	"strconv"
)

// stateMeta is what strata reads from a state to apply its write rules. Readable is false
// for payloads that are not a Terraform state with a serial and a lineage, such as
// OpenTofu's client-side encrypted states: those are stored as they come.
type stateMeta struct {
	Readable     bool
	Serial       int64
	Lineage      string
	HasResources bool
}

// parseState reads serial, lineage and whether any resource is recorded, without decoding
// the resources themselves.
func parseState(data []byte) stateMeta {
	var s struct {
		Serial    json.RawMessage   `json:"serial"`
		Lineage   *string           `json:"lineage"`
		Resources []json.RawMessage `json:"resources"`
	}
	if err := json.Unmarshal(data, &s); err != nil || len(s.Serial) == 0 || s.Lineage == nil {
		return stateMeta{}
	}
	serial, err := strconv.ParseInt(string(s.Serial), 10, 64)
	if err != nil || serial < 0 {
		return stateMeta{}
	}
	return stateMeta{Readable: true, Serial: serial, Lineage: *s.Lineage, HasResources: len(s.Resources) > 0}
}

// checkStateShape refuses a payload that looks like a Terraform state (it has a lineage) but
// whose serial strata cannot read: accepting it as "unreadable" would switch the write rules
// off for it. Payloads without a lineage (OpenTofu's client-side encryption) stay opaque.
func checkStateShape(data []byte) error {
	var s struct {
		Serial  json.RawMessage `json:"serial"`
		Lineage json.RawMessage `json:"lineage"`
	}
	if json.Unmarshal(data, &s) != nil || len(s.Lineage) == 0 {
		return nil
	}
	var lineage string
	if json.Unmarshal(s.Lineage, &lineage) != nil {
		return fault.Invalid("/lineage", "lineage must be a string")
	}
	if n, err := strconv.ParseInt(string(s.Serial), 10, 64); err != nil || n < 0 {
		return fault.Invalid("/serial", "serial must be a non-negative integer in a state that has a lineage")
	}
	return nil
}

// newLineage returns a random UUID (version 4), the form Terraform gives lineages.
func newLineage() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// placeholderState is the state a LOCK writes into a workspace row it has to create: a
// valid, empty state (version 4, serial 0, a new lineage, no resources). A valid state
// rather than empty data, because both Terraform 1.11 and OpenTofu 1.11 with backend "pg"
// fail with "error loading state: no state" on an empty row, while they adopt this one and
// write serial 1 on its lineage. terraform_version is old enough for every client to read.
func placeholderState() []byte {
	return fmt.Appendf(nil, `{"version":4,"terraform_version":"1.0.0","serial":0,"lineage":%q,"outputs":{},"resources":[],"check_results":null}`+"\n", newLineage())
}

// withSerial returns data with its top-level "serial" replaced by serial, every other byte
// unchanged. ok is false when data has no top-level serial to replace.
func withSerial(data []byte, serial int64) (out []byte, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		keyTok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := keyTok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false
		}
		if key != "serial" {
			continue
		}
		end := int(dec.InputOffset())
		start := end - len(raw)
		if start < 0 || !bytes.Equal(data[start:end], raw) {
			return nil, false
		}
		out = make([]byte, 0, len(data)+20)
		out = append(out, data[:start]...)
		out = strconv.AppendInt(out, serial, 10)
		out = append(out, data[end:]...)
		return out, true
	}
	if _, err := dec.Token(); err != nil && err != io.EOF {
		return nil, false
	}
	return nil, false
}
