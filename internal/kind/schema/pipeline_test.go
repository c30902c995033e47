package schema_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/fault"
)

func TestPresentFillsDefaultsOfRequiredFieldIntoOldObjects(t *testing.T) {
	t.Parallel()
	s := mustParse(t, richSchema)
	stored := obj(t, `{"size": 3, "net": {"zone": "a"}, "ports": [{"name": "http"}]}`)
	before := toJSON(t, stored)

	got := s.Present(stored)

	require.JSONEq(t, `{"size": 3, "replicas": 1, "mode": "safe", "comment": "none", "limits": {"cpu": 1},
		"net": {"zone": "a", "mtu": 1500}, "ports": [{"name": "http", "proto": "tcp"}]}`, toJSON(t, got))
	require.Equal(t, before, toJSON(t, stored), "Present must not mutate its input")
}

func TestPresentMapsAliasesHidesTombstonesAndDefaultsNullOnlyIfNotNullable(t *testing.T) {
	t.Parallel()
	s := mustParse(t, richSchema)
	got := s.Present(obj(t, `{"sizeInBytes": 7, "legacy": "x", "mode": null, "comment": null, "limits": null, "net": {}}`))
	require.JSONEq(t, `{"sizeBytes": 7, "replicas": 1, "mode": "safe", "comment": null,
		"limits": {"cpu": 1}, "net": {"mtu": 1500}}`, toJSON(t, got))

	// Both names stored: the canonical one wins on read.
	got = s.Present(obj(t, `{"sizeInBytes": 7, "sizeBytes": 8}`))
	require.Equal(t, json.Number("8"), got.(map[string]any)["sizeBytes"])
	require.NotContains(t, got.(map[string]any), "sizeInBytes")
}

func TestPresentPassesUnexpectedShapesThrough(t *testing.T) {
	t.Parallel()
	s := mustParse(t, richSchema)
	require.Equal(t, "text", s.Present("text"))
	require.Nil(t, s.Present(nil))
	got := s.Present(obj(t, `{"net": "not an object", "ports": {"a": 1}, "tags": [1, {"x": 2}]}`))
	require.JSONEq(t, `{"net": "not an object", "ports": {"a": 1}, "tags": [1, {"x": 2}],
		"replicas": 1, "mode": "safe", "comment": "none", "limits": {"cpu": 1}}`, toJSON(t, got))
}

// The acceptance case: an object stored before maximum was tightened to 10 can still have another
// field updated; the unchanged violation becomes a warning.
func TestAdmitRatchetsUnchangedViolationOnUpdate(t *testing.T) {
	t.Parallel()
	s := mustParse(t, richSchema)
	old := s.Present(obj(t, `{"size": 12, "name": "a"}`))

	out, warnings, err := s.Admit(obj(t, `{"size": 12, "name": "b"}`), old)
	require.NoError(t, err)
	require.Equal(t, []string{"/spec/size: unchanged value still violates maximum 10 (allowed because it was stored before)"}, warnings)
	require.Equal(t, "b", out.(map[string]any)["name"])
	require.Equal(t, json.Number("12"), out.(map[string]any)["size"])
}

func TestAdmitRejectsChangingViolationToAnotherInvalidValue(t *testing.T) {
	t.Parallel()
	s := mustParse(t, richSchema)
	old := s.Present(obj(t, `{"size": 12}`))

	_, _, err := s.Admit(obj(t, `{"size": 13}`), old)
	k, f := fields(t, err)
	require.Equal(t, fault.KindUnprocessable, k)
	require.Equal(t, map[string]string{"/spec/size": "maximum: 13 is greater than 10"}, f)
}

func TestAdmitNoOpUpdatePasses(t *testing.T) {
	t.Parallel()
	s := mustParse(t, richSchema)
	// code violates a pattern under allOf: ratcheted like any other constraint while the node
	// that declares the combinator is unchanged, as Kubernetes does (ratchet-k8s-golden.json).
	old := s.Present(obj(t, `{"size": 12, "tags": ["toolong"], "code": "ABC"}`))
	_, warnings, err := s.Admit(old, old)
	require.NoError(t, err, "re-sending an unchanged object never fails")
	require.Len(t, warnings, 3)

	old = s.Present(obj(t, `{"size": 12, "tags": ["toolong"]}`))
	_, warnings, err = s.Admit(old, old)
	require.NoError(t, err)
	require.Len(t, warnings, 2)
}

func TestAdmitFixThenRevertFails(t *testing.T) {
	t.Parallel()
	s := mustParse(t, richSchema)
	old := s.Present(obj(t, `{"size": 12}`))
	fixed, _, err := s.Admit(obj(t, `{"size": 5}`), old)
	require.NoError(t, err)

	_, _, err = s.Admit(obj(t, `{"size": 12}`), s.Present(fixed))
	_, f := fields(t, err)
	require.Equal(t, "maximum: 12 is greater than 10", f["/spec/size"])
}

func TestAdmitCreateIsNeverRatcheted(t *testing.T) {
	t.Parallel()
	s := mustParse(t, richSchema)
	_, _, err := s.Admit(obj(t, `{"size": 12, "ports": [{"name": "a", "port": 2000}]}`), nil)
	k, f := fields(t, err)
	require.Equal(t, fault.KindUnprocessable, k)
	require.Equal(t, map[string]string{
		"/spec/size":         "maximum: 12 is greater than 10",
		"/spec/ports/0/port": "maximum: 2000 is greater than 1000",
	}, f)
}

// A new required field without default fails as soon as anything in its parent object changes
// (required is attached to the parent), and not before.
func TestAdmitNewRequiredWithoutDefaultFailsWhenParentChanges(t *testing.T) {
	t.Parallel()
	s := mustParse(t, richSchema)
	old := s.Present(obj(t, `{"name": "a", "net": {"mtu": 9000}}`))

	_, warnings, err := s.Admit(obj(t, `{"name": "b", "net": {"mtu": 9000}}`), old)
	require.NoError(t, err, "an update outside the parent passes")
	require.Equal(t, []string{"/spec/net/zone: unchanged value still violates required (allowed because it was stored before)"}, warnings)

	_, _, err = s.Admit(obj(t, `{"name": "a", "net": {"mtu": 1400}}`), old)
	_, f := fields(t, err)
	require.Equal(t, map[string]string{"/spec/net/zone": `required: property "zone" is missing`}, f)
}

func TestAdmitUnknownFieldsAre400NamingEach(t *testing.T) {
	t.Parallel()
	s := mustParse(t, richSchema)
	_, _, err := s.Admit(obj(t, `{"bogus": 1, "net": {"zone": "a", "nope": true}, "ports": [{"name": "a", "x": 1}],
		"extra": {"anything": {"goes": 1}}, "labels": {"free": "ok"}}`), nil)
	k, f := fields(t, err)
	require.Equal(t, fault.KindInvalid, k)
	require.Equal(t, []string{"/spec/bogus", "/spec/net/nope", "/spec/ports/0/x"}, keys(f))
}

func TestAdmitDropsTombstonedFieldWithWarning(t *testing.T) {
	t.Parallel()
	s := mustParse(t, richSchema)
	out, warnings, err := s.Admit(obj(t, `{"legacy": "x", "net": {"zone": "a"}}`), nil)
	require.NoError(t, err)
	require.NotContains(t, out.(map[string]any), "legacy")
	require.Equal(t, []string{`/spec/legacy: field "legacy" was removed from the kind's schema; the value was dropped`}, warnings)
}

func TestAdmitKeepsDeprecatedFieldWithWarning(t *testing.T) {
	t.Parallel()
	s := mustParse(t, richSchema)
	out, warnings, err := s.Admit(obj(t, `{"old": "x", "net": {"zone": "a"}}`), nil)
	require.NoError(t, err)
	require.Equal(t, "x", out.(map[string]any)["old"])
	require.Equal(t, []string{`/spec/old: field "old" is deprecated`}, warnings)
}

func TestAdmitAliasesAndTheirConflictRule(t *testing.T) {
	t.Parallel()
	s := mustParse(t, richSchema)
	base := `"net": {"zone": "a"}`

	// Create with the old name: stored under the new one.
	out, warnings, err := s.Admit(obj(t, `{"sizeInBytes": 5, `+base+`}`), nil)
	require.NoError(t, err)
	require.Equal(t, json.Number("5"), out.(map[string]any)["sizeBytes"])
	require.NotContains(t, out.(map[string]any), "sizeInBytes")
	require.Len(t, warnings, 1)

	// A client that read {"sizeBytes": 5} and writes back both names: the changed one wins.
	old := s.Present(out)
	for _, tc := range []struct{ body, want string }{
		{`{"sizeInBytes": 5, "sizeBytes": 6, ` + base + `}`, "6"},
		{`{"sizeInBytes": 7, "sizeBytes": 5, ` + base + `}`, "7"},
		{`{"sizeInBytes": 5, "sizeBytes": 5, ` + base + `}`, "5"},
		{`{"sizeInBytes": 8, "sizeBytes": 8.0, ` + base + `}`, "8"},
	} {
		out, _, err := s.Admit(obj(t, tc.body), old)
		require.NoError(t, err, tc.body)
		require.Equal(t, json.Number(tc.want), out.(map[string]any)["sizeBytes"], tc.body)
	}

	// Both changed, to different values: 422 naming both.
	_, _, err = s.Admit(obj(t, `{"sizeInBytes": 7, "sizeBytes": 8, `+base+`}`), old)
	k, f := fields(t, err)
	require.Equal(t, fault.KindUnprocessable, k)
	require.Equal(t, []string{"/spec/sizeBytes", "/spec/sizeInBytes"}, keys(f))

	// On create both names with different values conflict too.
	_, _, err = s.Admit(obj(t, `{"sizeInBytes": 7, "sizeBytes": 8, `+base+`}`), nil)
	_, f = fields(t, err)
	require.Equal(t, []string{"/spec/sizeBytes", "/spec/sizeInBytes"}, keys(f))
}

// Items of an x-list-map-keys list are correlated by key, so reordering the list and changing
// another item keeps an unchanged violating item ratcheted.
func TestAdmitListMapKeysCorrelateReorderedItems(t *testing.T) {
	t.Parallel()
	s := mustParse(t, richSchema)
	old := s.Present(obj(t, `{"net": {"zone": "a"}, "ports": [{"name": "a", "port": 2000}, {"name": "b", "port": 80}]}`))

	_, warnings, err := s.Admit(obj(t, `{"net": {"zone": "a"}, "ports": [{"name": "b", "port": 81}, {"name": "a", "port": 2000}]}`), old)
	require.NoError(t, err)
	require.Equal(t, []string{"/spec/ports/1/port: unchanged value still violates maximum 1000 (allowed because it was stored before)"}, warnings)

	_, _, err = s.Admit(obj(t, `{"net": {"zone": "a"}, "ports": [{"name": "b", "port": 80}, {"name": "a", "port": 3000}]}`), old)
	_, f := fields(t, err)
	require.Equal(t, map[string]string{"/spec/ports/1/port": "maximum: 3000 is greater than 1000"}, f)

	// A new item with a key the old list lacks is not correlatable.
	_, _, err = s.Admit(obj(t, `{"net": {"zone": "a"}, "ports": [{"name": "c", "port": 2000}, {"name": "b", "port": 80}]}`), old)
	_, f = fields(t, err)
	require.Equal(t, []string{"/spec/ports/0/port"}, keys(f))
}

// Lists without map keys are atomic: any element change re-validates every element.
func TestAdmitAtomicListRevalidatesOnAnyChange(t *testing.T) {
	t.Parallel()
	s := mustParse(t, richSchema)
	old := s.Present(obj(t, `{"net": {"zone": "a"}, "tags": ["toolong", "ok", "c", "d"]}`))

	_, warnings, err := s.Admit(obj(t, `{"net": {"zone": "b"}, "tags": ["toolong", "ok", "c", "d"]}`), old)
	require.NoError(t, err)
	require.Len(t, warnings, 2) // maxLength of item 0 and maxItems of the list

	_, _, err = s.Admit(obj(t, `{"net": {"zone": "a"}, "tags": ["toolong", "ok2", "c", "d"]}`), old)
	_, f := fields(t, err)
	require.Equal(t, map[string]string{
		"/spec/tags":   "maxItems: 4 items, at most 3 allowed",
		"/spec/tags/0": "maxLength: length 7 is greater than 5",
	}, f)
}

func TestAdmitCanonicalisesIntegersSoTypedReadersDecodeThem(t *testing.T) {
	t.Parallel()
	s := mustParse(t, richSchema)
	out, _, err := s.Admit(obj(t, `{"replicas": 2.0, "size": 1e1, "ratio": 1.0, "net": {"zone": "a", "mtu": 15e2}}`), nil)
	require.NoError(t, err)
	m := out.(map[string]any)
	require.Equal(t, json.Number("2"), m["replicas"])
	require.Equal(t, json.Number("10"), m["size"])
	require.Equal(t, json.Number("1.0"), m["ratio"], "number fields keep their text")

	var typed struct {
		Replicas int `json:"replicas"`
		Size     int `json:"size"`
		Net      struct {
			MTU int `json:"mtu"`
		} `json:"net"`
	}
	require.NoError(t, json.Unmarshal([]byte(toJSON(t, out)), &typed))
	require.Equal(t, 1500, typed.Net.MTU)

	// The uncanonicalised literal is what a typed reader would choke on.
	require.Error(t, json.Unmarshal([]byte(`{"replicas": 2.0}`), &typed))
}

func TestAdmitKeepsBigNumberPrecision(t *testing.T) {
	t.Parallel()
	s := mustParse(t, richSchema)
	out, _, err := s.Admit(obj(t, `{"big": 12345678901234567890, "ratio": 0.12345678901234567890123, "net": {"zone": "a"}}`), nil)
	require.NoError(t, err)
	require.Contains(t, toJSON(t, out), `"big":12345678901234567890`)
	require.Contains(t, toJSON(t, out), `"ratio":0.12345678901234567890123`)

	out, _, err = s.Admit(obj(t, `{"big": 12345678901234567890.000, "net": {"zone": "a"}}`), nil)
	require.NoError(t, err)
	require.Equal(t, json.Number("12345678901234567890"), out.(map[string]any)["big"])
}

func TestAdmitRefusesNumbersTheValidatorCannotProcess(t *testing.T) {
	t.Parallel()
	s := mustParse(t, richSchema)
	_, _, err := s.Admit(obj(t, `{"size": 1e10000000, "net": {"zone": "a"}}`), nil)
	k, f := fields(t, err)
	require.Equal(t, fault.KindUnprocessable, k)
	require.Equal(t, []string{"/spec/size"}, keys(f))
	require.Contains(t, f["/spec/size"], "out of range")

	// Without the guard the validator dereferences the nil big.Rat it gets for such a number.
	n := mustParse(t, `{"type": "object", "properties": {"r": {"type": "number", "maximum": 5},
		"l": {"type": "array", "uniqueItems": true, "items": {"type": "number"}}}}`)
	for _, body := range []string{`{"r": 1e10000000}`, `{"l": [1e-10000000, 1]}`} {
		_, _, err := n.Admit(obj(t, body), nil)
		_, f := fields(t, err)
		require.Len(t, f, 1, body)
		require.NotNil(t, n.Violations(obj(t, body)), body)
	}
}

func TestAdmitDoesNotMutateItsInputs(t *testing.T) {
	t.Parallel()
	s := mustParse(t, richSchema)
	spec := obj(t, `{"sizeInBytes": 1, "legacy": "x", "replicas": 1.0, "net": {"zone": "a"}}`)
	old := s.Present(obj(t, `{"sizeBytes": 1, "net": {"zone": "a"}}`))
	specBefore, oldBefore := toJSON(t, spec), toJSON(t, old)
	_, _, err := s.Admit(spec, old)
	require.NoError(t, err)
	require.Equal(t, specBefore, toJSON(t, spec))
	require.Equal(t, oldBefore, toJSON(t, old))
}

func TestAdmitRefusesNonObjectSpec(t *testing.T) {
	t.Parallel()
	s := mustParse(t, richSchema)
	for _, spec := range []any{nil, "x", []any{}} {
		_, _, err := s.Admit(spec, nil)
		k, f := fields(t, err)
		require.Equal(t, fault.KindUnprocessable, k)
		require.Contains(t, f, "/spec")
	}
}

func TestAdmitFormatIsAnAnnotationUnlessTheSchemaAssertsIt(t *testing.T) {
	t.Parallel()
	const tmpl = `{"type": "object", %s "properties": {"mail": {"type": "string", "format": "email"}}}`
	loose := mustParse(t, `{"type": "object", "properties": {"mail": {"type": "string", "format": "email"}}}`)
	strict := mustParse(t, `{"type": "object", "x-assert-formats": true, "properties": {"mail": {"type": "string", "format": "email"}}}`)
	_ = tmpl

	_, _, err := loose.Admit(obj(t, `{"mail": "not-an-email"}`), nil)
	require.NoError(t, err)
	_, _, err = strict.Admit(obj(t, `{"mail": "not-an-email"}`), nil)
	_, f := fields(t, err)
	require.Equal(t, []string{"/spec/mail"}, keys(f))
	require.False(t, loose.AssertsFormats())
	require.True(t, strict.AssertsFormats())
}

func TestViolationsNormalisesEveryLeaf(t *testing.T) {
	t.Parallel()
	s := mustParse(t, richSchema)
	spec := s.Present(obj(t, `{"size": 11, "net": {"mtu": 1}, "ports": [{"name": "a"}, {"name": "b", "port": 1001}],
		"labels": {"k": "waytoolongvalue"}, "stray": 1, "code": "X1"}`))
	got := s.Violations(spec)
	require.Equal(t, []string{
		"/spec/code pattern /properties/code",
		"/spec/labels/k maxLength /properties/labels/additionalProperties",
		"/spec/net/zone required /properties/net/properties/zone",
		"/spec/ports/1/port maximum /properties/ports/items/properties/port",
		"/spec/size maximum /properties/size",
		"/spec/stray additionalProperties /properties/stray",
	}, summarise(got))
	require.Empty(t, s.Violations(s.Present(obj(t, `{"net": {"zone": "a"}}`))))
}

func TestAdmitMapListKeysMustBeUnique(t *testing.T) {
	t.Parallel()
	s := mustParse(t, richSchema)
	dup := `{"net": {"zone": "a"}, "ports": [{"name": "a"}, {"name": "b"}, {"name": "a", "port": 1}]}`
	_, _, err := s.Admit(obj(t, dup), nil)
	_, f := fields(t, err)
	require.Equal(t, map[string]string{"/spec/ports/2": "x-list-map-keys: item 2 has the same name as item 0"}, f)

	// A stored list with duplicates ratchets while the list is unchanged.
	old := s.Present(obj(t, dup))
	_, warnings, err := s.Admit(obj(t, `{"net": {"zone": "b"}, "ports": [{"name": "a"}, {"name": "b"}, {"name": "a", "port": 1}]}`), old)
	require.NoError(t, err)
	require.Len(t, warnings, 1)
	require.Equal(t, []string{"/spec/ports/2 x-list-map-keys /properties/ports"}, summarise(s.Violations(old)))
}

func TestSchemaIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	s := mustParse(t, richSchema)
	old := s.Present(obj(t, `{"size": 12, "net": {"zone": "a"}, "ports": [{"name": "a", "port": 2000}]}`))
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 50 {
				out, _, err := s.Admit(obj(t, `{"size": 12, "sizeInBytes": 1, "net": {"zone": "b"}, "ports": [{"name": "a", "port": 2000}]}`), old)
				if err != nil {
					t.Error(err)
					return
				}
				s.Violations(s.Present(out))
			}
		}()
	}
	for range 4 {
		<-done
	}
}
