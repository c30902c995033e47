package pillar_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/kind"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/pillar/sls"
	"github.com/stratahq/strata/internal/resource"
)

// typed is a replica wired as the server wires it: resources judged by the registry, and
// typed pillar categories validated and checked by it.
type typed struct {
	*bundle
	kinds *kind.Service
}

// setupTyped is emptyTyped with org acme and its nodes web01 and web02.
func setupTyped(t *testing.T) *typed {
	t.Helper()
	b := emptyTyped(t)
	ctx := context.Background()
	_, err := b.res.Create(ctx, resource.Ref{Kind: resource.KindOrg, Name: "acme"}, api.Object{})
	require.NoError(t, err)
	for _, n := range []string{"web01", "web02"} {
		_, err = b.res.Create(ctx, resource.Ref{Kind: resource.KindNode, Name: n}, node("acme", nil))
		require.NoError(t, err)
	}
	return b
}

// boundNtp is setupTyped with NtpFormula registered (ntpV1) and category ntp bound to it.
func boundNtp(t *testing.T) *typed {
	t.Helper()
	b := setupTyped(t)
	_, err := b.register(t, ntpV1)
	require.NoError(t, err)
	_, _, err = b.svc.SetCategory(context.Background(), "ntp", api.PillarCategoryRequest{Kind: "NtpFormula"}, "t")
	require.NoError(t, err)
	return b
}

func (b *typed) register(t *testing.T, schema string, acks ...api.KindAck) (api.KindResult, error) {
	t.Helper()
	return b.kinds.Register(context.Background(), auth.AuditActor{Actor: "test"}, "NtpFormula",
		api.KindRequest{Scope: "global", Schema: json.RawMessage(schema), Acknowledge: acks}, false)
}

func faultOf(t *testing.T, err error, kind fault.Kind) *fault.Error {
	t.Helper()
	var fe *fault.Error
	require.True(t, errors.As(err, &fe), "want a fault, got %v", err)
	require.Equal(t, kind, fe.Kind, "%v", err)
	return fe
}

var (
	web01 = pillar.Target{Kind: "node", Node: "web01"}
	web02 = pillar.Target{Kind: "node", Node: "web02"}
)

// ntpSchema is NtpFormula's schema: servers, maxpoll at most maxpoll, weight of type weight,
// and the extra properties (JSON members) given.
func ntpSchema(maxpoll int, weight string, extra ...string) string {
	props := fmt.Sprintf(`"servers":{"type":"array","minItems":1,"items":{"type":"string"}},"maxpoll":{"type":"integer","maximum":%d},"weight":{"type":%q}`, maxpoll, weight)
	for _, e := range extra {
		props += "," + e
	}
	return `{"type":"object","additionalProperties":false,"properties":{` + props + `}}`
}

var ntpV1 = ntpSchema(17, "number")

// TestTypedCategory walks issue 19's acceptance for typed categories: writes of a bound
// category at any target are validated by the kind (422 naming the pointer); defaults are
// filled in, also into rows stored before a revision added them; a narrowing revision with a
// violating stored row is refused and names the target; a tightening with ratcheting lets the
// old row be updated elsewhere; binding over invalid rows is refused and lists them.
func TestTypedCategory(t *testing.T) {
	t.Parallel()
	b := setupTyped(t)
	ctx := context.Background()
	_, err := b.register(t, ntpV1)
	require.NoError(t, err)

	// Rows written before the binding; one does not validate.
	_, _, err = b.svc.Put(ctx, web01, "ntp", obj(t, `{"servers":["a"],"maxpoll":10}`), "", "t")
	require.NoError(t, err)
	_, _, err = b.svc.Put(ctx, web02, "ntp", obj(t, `{"servers":"b"}`), "", "t")
	require.NoError(t, err)
	_, _, err = b.svc.SetCategory(ctx, "ntp", api.PillarCategoryRequest{Kind: "NtpFormula"}, "t")
	fe := faultOf(t, err, fault.KindConflict)
	viols := fe.Extensions["violations"].([]pillar.CategoryViolation)
	require.Equal(t, []pillar.CategoryViolation{{Target: "node/web02", Field: "/servers", Message: viols[0].Message}}, viols)
	c, err := b.svc.GetCategory(ctx, "ntp")
	require.NoError(t, err)
	require.Empty(t, c.Kind, "a refused binding binds nothing")

	// Unknown kinds and built-in kinds are a 422 on /kind.
	_, _, err = b.svc.SetCategory(ctx, "ntp", api.PillarCategoryRequest{Kind: "Nope"}, "t")
	require.Equal(t, "/kind", faultOf(t, err, fault.KindUnprocessable).Fields[0].Field)
	_, _, err = b.svc.SetCategory(ctx, "ntp", api.PillarCategoryRequest{Kind: "Node"}, "t")
	require.Equal(t, "/kind", faultOf(t, err, fault.KindUnprocessable).Fields[0].Field)

	_, _, err = b.svc.Put(ctx, web02, "ntp", obj(t, `{"servers":["b","c","d"]}`), "", "t")
	require.NoError(t, err)
	c, created, err := b.svc.SetCategory(ctx, "ntp", api.PillarCategoryRequest{Kind: "NtpFormula"}, "t")
	require.NoError(t, err)
	require.True(t, created, "the refused attempt left no properties")
	require.Equal(t, "NtpFormula", c.Kind)
	require.EqualValues(t, 2, c.Rows)

	// Writes at any target are validated: a 422 naming the pointer; unknown members a 400.
	_, _, err = b.svc.Put(ctx, web01, "ntp", obj(t, `{"servers":[]}`), "", "t")
	fe = faultOf(t, err, fault.KindUnprocessable)
	require.Equal(t, "/servers", fe.Fields[0].Field)
	require.Contains(t, fe.Detail, "bound to kind NtpFormula")
	_, _, err = b.svc.Put(ctx, pillar.Global, "ntp", obj(t, `{"servers":["x"],"bogus":1}`), "", "t")
	require.Equal(t, "/bogus", faultOf(t, err, fault.KindInvalid).Fields[0].Field)
	// Other categories stay untyped.
	_, _, err = b.svc.Put(ctx, web01, "other", obj(t, `{"servers":[]}`), "", "t")
	require.NoError(t, err)

	// A revision with a default: stored rows are presented with it, and every reader sees it
	// (the Go render and the SQL function alike).
	ntpV2 := ntpSchema(17, "number", `"iburst":{"type":"boolean","default":true}`)
	_, err = b.register(t, ntpV2)
	require.NoError(t, err)
	got, err := b.svc.Get(ctx, web01, "ntp")
	require.NoError(t, err)
	require.Equal(t, true, got.Data["iburst"])
	r, err := b.svc.Render(ctx, b.res, "web02", false)
	require.NoError(t, err)
	require.Equal(t, true, r.Decoded()["iburst"])
	require.Equal(t, true, nodePillarRows(t, b.db, "web02")[0]["iburst"], "node_pillars reads the default too")
	hist, err := b.svc.History(ctx, web01, "ntp", 0, 10)
	require.NoError(t, err)
	require.Nil(t, hist[0].Old["iburst"])
	require.Equal(t, true, hist[0].New["iburst"], "the presentation is a change in the history")
	// New writes get it too.
	p, _, err := b.svc.Put(ctx, web01, "ntp", obj(t, `{"servers":["a"]}`), "", "t")
	require.NoError(t, err)
	require.Equal(t, true, p.Data["iburst"])

	// Narrowing weight from number to integer while web02's row holds 1.5: refused, the row
	// named.
	_, _, err = b.svc.Put(ctx, web02, "ntp", obj(t, `{"servers":["b"],"weight":1.5}`), "", "t")
	require.NoError(t, err)
	narrow := ntpSchema(17, "integer", `"iburst":{"type":"boolean","default":true}`)
	res, err := b.register(t, narrow)
	require.Error(t, err, "%+v", res)
	rep := faultOf(t, err, fault.KindConflict).Extensions["report"].(api.KindReport)
	found := false
	for _, f := range rep.Changes {
		if f.Impact != nil {
			require.Contains(t, f.Impact.Sample, kind.HeldLabel("node/web02/ntp"))
			found = true
		}
	}
	require.True(t, found, "the refusal lists the violating row: %+v", rep)

	// A tightening the stored rows violate, acknowledged where it asks to be: accepted with
	// the row listed; the row can then be updated elsewhere (ratcheting) but not made worse.
	_, _, err = b.svc.Put(ctx, web01, "ntp", obj(t, `{"servers":["a"],"maxpoll":15}`), "", "t")
	require.NoError(t, err)
	tight := ntpSchema(12, "number", `"iburst":{"type":"boolean","default":true}`)
	res, err = b.register(t, tight)
	require.NoError(t, err, "tightening a maximum is accepted with the affected rows listed")
	listed := false
	for _, f := range res.Report.Changes {
		if f.Impact != nil && len(f.Impact.Sample) > 0 {
			require.Equal(t, []string{kind.HeldLabel("node/web01/ntp")}, f.Impact.Sample)
			listed = true
		}
	}
	require.True(t, listed, "%+v", res.Report)
	p, _, err = b.svc.Put(ctx, web01, "ntp", obj(t, `{"servers":["a","z"],"maxpoll":15}`), "", "t")
	require.NoError(t, err, "an unchanged violation ratchets")
	require.NotEmpty(t, p.Warnings)
	_, _, err = b.svc.Put(ctx, web01, "ntp", obj(t, `{"servers":["a","z"],"maxpoll":16}`), "", "t")
	require.Equal(t, "/maxpoll", faultOf(t, err, fault.KindUnprocessable).Fields[0].Field)
	_, _, err = b.svc.Put(ctx, web02, "ntp", obj(t, `{"servers":["b"],"maxpoll":15}`), "", "t")
	require.Equal(t, "/maxpoll", faultOf(t, err, fault.KindUnprocessable).Fields[0].Field, "a row that did not hold the violation cannot take it")

	// Unbinding leaves the rows and lets anything be written again.
	require.NoError(t, b.svc.DeleteCategory(ctx, "ntp", "t"))
	_, _, err = b.svc.Put(ctx, web02, "ntp", obj(t, `{"servers":"anything"}`), "", "t")
	require.NoError(t, err)
	cats, err := b.svc.ListCategories(ctx)
	require.NoError(t, err)
	require.Len(t, cats, 2)
	require.Equal(t, "ntp", cats[0].Category)
	require.Empty(t, cats[0].Kind)
	require.Equal(t, "other", cats[1].Category)
}

// TestTypedCategoryRegistrationSeesConcurrentWrites: writers put rows of a bound category
// while registrations narrow the kind. Whatever the interleaving, no narrowing registers
// while a row violating it is stored: each registration either is refused or finds no
// violating row, and after it no violating write is admitted. The control
// (TestTypedCategoryControl) shows a check that ignores pillar rows lets one through.
func TestTypedCategoryRegistrationSeesConcurrentWrites(t *testing.T) {
	t.Parallel()
	b := boundNtp(t)
	ctx := context.Background()

	// Writers alternate between a value the narrowing allows and one it refuses.
	narrow := narrowServers
	var (
		wg     sync.WaitGroup
		writes atomic.Int64
	)
	stop := make(chan struct{})
	for i, tg := range []pillar.Target{web01, web02, pillar.Global} {
		wg.Add(1)
		go func(i int, tg pillar.Target) {
			defer wg.Done()
			for n := 0; ; n++ {
				writes.Add(1)
				select {
				case <-stop:
					return
				default:
				}
				v := `{"servers":["ok"],"weight":1}`
				if (n+i)%2 == 1 {
					v = `{"servers":["ok"],"weight":1.5}`
				}
				_, _, err := b.svc.Put(ctx, tg, "ntp", obj(t, v), "", "t")
				if err != nil && fault.KindOf(err) != fault.KindUnprocessable {
					t.Errorf("put: %v", err)
					return
				}
			}
		}(i, tg)
	}
	// Registrations start once the writers are under way, each target written a few times.
	require.Eventually(t, func() bool { return writes.Load() > 30 }, 30*time.Second, time.Millisecond)
	registered, attempt := false, 0
	for ; attempt < 200 && !registered; attempt++ {
		_, err := b.register(t, narrow)
		switch {
		case err == nil:
			registered = true
		case fault.KindOf(err) != fault.KindConflict:
			t.Fatalf("register: %v", err)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("the narrowing registered at attempt %d", attempt)
	require.True(t, registered, "a narrowing should find a moment without violating rows in 200 attempts")
	// Every stored row conforms to the narrowing: none was written under the old revision
	// after the scan looked.
	require.Empty(t, violating(t, b), "rows hold a value the registered narrowing refuses")
}

// narrowServers narrows weight from number to integer (a change refused while a stored value
// violates it).
var narrowServers = ntpSchema(17, "integer")

// violating returns the targets whose ntp row holds a weight narrowServers refuses.
func violating(t *testing.T, b *typed) []string {
	t.Helper()
	var out []string
	for _, tg := range []pillar.Target{web01, web02, pillar.Global} {
		p, err := b.svc.Get(context.Background(), tg, "ntp")
		if fault.KindOf(err) == fault.KindNotFound {
			continue
		}
		require.NoError(t, err)
		if w, ok := p.Data["weight"].(json.Number); ok && strings.Contains(w.String(), ".") {
			out = append(out, tg.String())
		}
	}
	return out
}

// TestTypedCategoryControl is the control of the test above: a registry that does not know
// the pillar rows (no holder) registers the narrowing over a row violating it, which
// violating() then finds — so the check above can fail.
func TestTypedCategoryControl(t *testing.T) {
	t.Parallel()
	b := boundNtp(t)
	ctx := context.Background()
	_, _, err := b.svc.Put(ctx, web01, "ntp", obj(t, `{"servers":["x"],"weight":2.5}`), "", "t")
	require.NoError(t, err)
	_, err = b.register(t, narrowServers)
	faultOf(t, err, fault.KindConflict)
	b.kinds.SetHolder(nil)
	_, err = b.register(t, narrowServers)
	require.NoError(t, err)
	require.Equal(t, []string{"node/web01"}, violating(t, b))
}

// principal is a caller holding scopes, as the API puts it in a request's context.
func principal(t *testing.T, ctx context.Context, scopes ...string) context.Context {
	t.Helper()
	p := &auth.Principal{TokenID: "t1", Name: "limited"}
	for _, s := range scopes {
		sc, err := auth.ParseScope(s)
		require.NoError(t, err)
		p.Scopes = append(p.Scopes, sc)
	}
	return auth.WithPrincipal(ctx, p)
}

// TestTypedCategoryIsolation: a registrant that may read every object of the kind but not
// every pillar target cannot run a data-aware check over bound rows (403 naming
// pillars:read:*), while a change that needs no data passes; stored reports name pillar rows
// only to readers of their target.
func TestTypedCategoryIsolation(t *testing.T) {
	t.Parallel()
	b := boundNtp(t)
	ctx := context.Background()
	_, _, err := b.svc.Put(ctx, web02, "ntp", obj(t, `{"servers":["b"],"maxpoll":15}`), "", "t")
	require.NoError(t, err)

	limited := principal(t, ctx, "kinds:write:*", "kinds:read:*", "resources:read:*", "pillars:read:node/web01")
	tighten := ntpSchema(12, "number")
	_, err = b.kinds.Register(limited, auth.AuditActor{Actor: "limited"}, "NtpFormula", api.KindRequest{Schema: json.RawMessage(tighten)}, false)
	fe := faultOf(t, err, fault.KindForbidden)
	require.Contains(t, fe.Detail, "pillars:read:*")
	optional := ntpSchema(17, "number", `"note":{"type":"string"}`)
	_, err = b.kinds.Register(limited, auth.AuditActor{Actor: "limited"}, "NtpFormula", api.KindRequest{Schema: json.RawMessage(optional)}, false)
	require.NoError(t, err, "a change that needs no data needs no pillar scope")

	// The tightening by a full reader lists node/web02's row; the limited reader's view of
	// the stored report does not.
	res, err := b.register(t, ntpSchema(12, "number", `"note":{"type":"string"}`))
	require.NoError(t, err)
	require.Contains(t, res.Report.Changes[0].Impact.Sample, kind.HeldLabel("node/web02/ntp"))
	rev, err := b.kinds.Revision(limited, "NtpFormula", res.Revision)
	require.NoError(t, err)
	for _, f := range rev.Report.Changes {
		if f.Impact != nil {
			require.NotContains(t, f.Impact.Sample, kind.HeldLabel("node/web02/ntp"))
		}
	}
	require.True(t, rev.Report.Filtered)
}

// TestImportSecretRowRefusalQuotesNoValue (issue 22): a typed category's refusal quotes the
// value ("pattern: \"…\" does not match"); for a row holding decrypted PGP values the
// importer keeps the fault and the field but not the value, so the plaintext never reaches
// the answer. The same row not marked secret shows the value, which proves the check bites.
func TestImportSecretRowRefusalQuotesNoValue(t *testing.T) {
	t.Parallel()
	b := setupTyped(t)
	keys, _ := newKeys(t, 1)
	b.svc.UseKeys(keys)
	ctx := context.Background()
	_, err := b.register(t, ntpSchema(17, "number", `"key":{"type":"string","pattern":"^[a-f0-9]+$"}`))
	require.NoError(t, err)
	_, _, err = b.svc.SetCategory(ctx, "ntp", api.PillarCategoryRequest{Kind: "NtpFormula"}, "t")
	require.NoError(t, err)
	plan := func(secret bool) sls.Plan {
		return sls.Plan{Env: "base", Unsupported: []sls.Unsupported{}, Rows: []sls.Row{{
			Target: sls.Target{Kind: "global", Match: "*"}, Category: "ntp", Sources: []string{"ntp.sls"}, Secret: secret,
			Data: map[string]any{"servers": []any{"a"}, "key": "hunter2-plaintext"},
		}}}
	}
	_, err = b.svc.Import(ctx, b.res, plan(false), pillar.ImportOptions{DryRun: true}, "t")
	fe := faultOf(t, err, fault.KindUnprocessable)
	require.Contains(t, fmt.Sprint(fe.Fields), "hunter2-plaintext", "schema messages quote the value")

	_, err = b.svc.Import(ctx, b.res, plan(true), pillar.ImportOptions{DryRun: true}, "t")
	fe = faultOf(t, err, fault.KindUnprocessable)
	require.NotContains(t, err.Error(), "hunter2")
	require.NotContains(t, fmt.Sprint(fe), "hunter2")
	require.Equal(t, []fault.FieldError{{Field: "/key", Message: "pattern: the value is secret and not shown"}}, fe.Fields)
}

// TestTypedSecretCategoryNoOracle (issue 22): a category both typed and secret. Writes are
// validated on the plaintext and stored sealed; a registration that must read the bound
// rows — which would answer, guess by guess, whether a secret value passes a schema — needs
// pillars:read-secrets:* beside pillars:read:* (403 naming it); with it, the check sees the
// plaintext (the tightening lists the secret row it affects).
func TestTypedSecretCategoryNoOracle(t *testing.T) {
	t.Parallel()
	b := boundNtp(t)
	keys, _ := newKeys(t, 1)
	b.svc.UseKeys(keys)
	ctx := principal(t, context.Background(), "admin")
	_, _, err := b.svc.Put(ctx, web02, "ntp", obj(t, `{"servers":["b"],"maxpoll":15}`), "", "t")
	require.NoError(t, err)
	_, _, err = b.svc.SetCategory(ctx, "ntp", api.PillarCategoryRequest{Kind: "NtpFormula", Secret: true}, "t")
	require.NoError(t, err)
	_, _, err = b.svc.Put(ctx, web02, "ntp", obj(t, `{"servers":[]}`), "", "t")
	require.Equal(t, fault.KindUnprocessable, fault.KindOf(err), "the kind validates a secret category's writes")

	reader := principal(t, context.Background(), "kinds:write:*", "kinds:read:*", "resources:read:*", "pillars:read:*")
	_, err = b.kinds.Register(reader, auth.AuditActor{Actor: "reader"}, "NtpFormula", api.KindRequest{Schema: json.RawMessage(ntpSchema(12, "number"))}, false)
	fe := faultOf(t, err, fault.KindForbidden)
	require.Contains(t, fe.Detail, "pillars:read-secrets:*")

	full := principal(t, context.Background(), "kinds:write:*", "kinds:read:*", "resources:read:*", "pillars:read:*", "pillars:read-secrets:*")
	res, err := b.kinds.Register(full, auth.AuditActor{Actor: "full"}, "NtpFormula", api.KindRequest{Schema: json.RawMessage(ntpSchema(12, "number"))}, false)
	require.NoError(t, err)
	require.Contains(t, res.Report.Changes[0].Impact.Sample, kind.HeldLabel("node/web02/ntp"), "the check read the sealed row's maxpoll 15 > 12")
}
