package main_test

// The metadata race harness (issue 8): many clients on several strata processes PATCH the same
// labels and annotations of the same objects at once; afterwards no key is stored twice, the
// tables hold exactly what the API shows, and the final objects are what the acknowledged
// writes say they are. The control shows that the duplicate check does find duplicates when
// the write path can make them.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/pgtest"
)

// duplicateQueries find the (resource, key) pairs stored more than once in labels and in
// annotations of the DB's schema. Both tests use them: the race test expects none, the control
// (a table without the unique constraint) expects some.
var duplicateQueries = map[string]*db.Query{
	"labels": {Name: "RaceLabelDuplicates", Text: `SELECT resource_id, key_prefix, key_name, count(*)
FROM {{schema}}.labels GROUP BY 1, 2, 3 HAVING count(*) > 1 ORDER BY 1, 2, 3`},
	"annotations": {Name: "RaceAnnotationDuplicates", Text: `SELECT resource_id, key_prefix, key_name, count(*)
FROM {{schema}}.annotations GROUP BY 1, 2, 3 HAVING count(*) > 1 ORDER BY 1, 2, 3`},
}

// duplicate is one (resource, key) stored Count times.
type duplicate struct {
	ResourceID int64
	Prefix     string
	Name       string
	Count      int64
}

// findDuplicates lists the keys stored more than once in table ("labels" or "annotations").
func findDuplicates(ctx context.Context, d *db.DB, table string) ([]duplicate, error) {
	q, ok := duplicateQueries[table]
	if !ok {
		return nil, fmt.Errorf("no duplicate query for table %q", table)
	}
	rows, err := d.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []duplicate
	for rows.Next() {
		var dup duplicate
		if err := rows.Scan(&dup.ResourceID, &dup.Prefix, &dup.Name, &dup.Count); err != nil {
			return nil, err
		}
		out = append(out, dup)
	}
	return out, rows.Err()
}

var metadataRowQueries = map[string]*db.Query{
	"labels": {Name: "RaceLabelRows", Text: `SELECT r.kind, r.org, r.name, l.key_prefix, l.key_name, l.value
FROM {{schema}}.labels l JOIN {{schema}}.resources r ON r.id = l.resource_id`},
	"annotations": {Name: "RaceAnnotationRows", Text: `SELECT r.kind, r.org, r.name, a.key_prefix, a.key_name, a.value
FROM {{schema}}.annotations a JOIN {{schema}}.resources r ON r.id = a.resource_id`},
}

// storedMetadata reads every row of table as kind/org/name -> key -> value, turning
// (key_prefix, key_name) back into the API's key ("prefix/name", or "name" when the prefix is
// ”). A key stored twice is an error (findDuplicates says which).
func storedMetadata(ctx context.Context, d *db.DB, table string) (map[string]map[string]string, error) {
	rows, err := d.Query(ctx, metadataRowQueries[table])
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]map[string]string{}
	for rows.Next() {
		var kind, org, name, prefix, keyName, value string
		if err := rows.Scan(&kind, &org, &name, &prefix, &keyName, &value); err != nil {
			return nil, err
		}
		key := keyName
		if prefix != "" {
			key = prefix + "/" + keyName
		}
		res := kind + "/" + org + "/" + name
		if out[res] == nil {
			out[res] = map[string]string{}
		}
		if _, dup := out[res][key]; dup {
			return nil, fmt.Errorf("%s: %s %q stored twice", res, table, key)
		}
		out[res][key] = value
	}
	return out, rows.Err()
}

// replicas starts n strata processes on one fresh database and returns their URLs, the
// admin token and the database URL.
func replicas(t *testing.T, n int) (urls []string, token, dbURL string) {
	t.Helper()
	dbURL = pgtest.NewDatabaseURL(t)
	token = "strata_" + strings.Repeat("metadataRaceToken", 3)
	env := []string{"STRATA_BOOTSTRAP_TOKEN=" + token, "STRATA_DATABASE_URL=" + dbURL}
	servers := make([]*server, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); servers[i] = startServer(t, env, "--data-dir", dataDir(t)) }()
	}
	wg.Wait()
	for _, s := range servers {
		require.NotNil(t, s, "a replica failed to start")
		urls = append(urls, s.url)
	}
	return urls, token, dbURL
}

// raceResource is one object the clients race on.
type raceResource struct{ plural, name string }

func (r raceResource) String() string { return r.plural + "/" + r.name }

// ack is one acknowledged (2xx) PATCH: what was sent and the object the server answered with.
type ack struct {
	res         raceResource
	labels      map[string]*string // the patch's labels; nil deletes the key
	annotations map[string]*string
	obj         client.Object
	rv          int64
}

// raceTally counts the outcomes of the racing requests.
type raceTally struct {
	mu            sync.Mutex
	requests      int
	ok            int
	preconditions int
	conflicts     int
	failures      []string // every other outcome, with the server's answer
	acks          []ack
}

func (t *raceTally) fail(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failures = append(t.failures, fmt.Sprintf(format, args...))
}

// Keys the clients fight over: unprefixed and prefixed, the same names in labels and
// annotations.
var (
	raceLabelKeys      = []string{"shared", "env", "empty", "example.com/k", "race.strata-test.io/zone"}
	raceAnnotationKeys = []string{"shared", "note", "example.com/k", "example.com/owner"}
)

// racePatchKeys picks a random non-empty subset of keys and a value for each: a value of the
// writer's own, the empty string, or null (delete).
func racePatchKeys(rng *rand.Rand, keys []string, value string) map[string]*string {
	out := map[string]*string{}
	for len(out) == 0 {
		for _, k := range keys {
			if rng.IntN(2) == 0 {
				continue
			}
			switch rng.IntN(4) {
			case 0, 1:
				v := value
				out[k] = &v
			case 2:
				out[k] = new(string)
			default:
				out[k] = nil
			}
		}
	}
	return out
}

// applyPatch is RFC 7396 on a flat map of strings.
func applyPatch(cur map[string]string, patch map[string]*string) map[string]string {
	out := maps.Clone(cur)
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range patch {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = *v
		}
	}
	return out
}

// sameMeta reports whether a and b have the same labels and annotations (absent and empty
// alike).
func sameMeta(a, b client.Object) bool {
	return maps.Equal(nonNil(a.Metadata.Labels), nonNil(b.Metadata.Labels)) &&
		maps.Equal(nonNil(a.Metadata.Annotations), nonNil(b.Metadata.Annotations))
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// TestMetadataRaceAcrossReplicas: 96 clients spread over three strata processes on one
// database, released together, each send 10 merge patches setting, emptying and deleting
// overlapping label and annotation keys (prefixed and not) of the same org and four nodes; a
// third of the patches carry the resourceVersion read just before as a precondition. Every
// answer must be 2xx, or 409 for a precondition. Afterwards: no (resource, key) is stored
// twice; the label and annotation rows are exactly what GET shows; the acknowledged writes of
// each object, in resourceVersion order, replay to their own answers (no write was lost or
// reordered: each answer is the previous one with its patch applied); and the final object is
// the answer to the acknowledged write with the highest resourceVersion.
func TestMetadataRaceAcrossReplicas(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const servers, clients, rounds = 3, 96, 10
	urls, token, dbURL := replicas(t, servers)
	admin, err := client.New(urls[0], token, nil)
	require.NoError(t, err)

	// The objects: an org and four nodes in it, each starting with a label and an annotation.
	resources := []raceResource{{"orgs", "race"}}
	for i := range 4 {
		resources = append(resources, raceResource{"nodes", fmt.Sprintf("n%d", i)})
	}
	created := map[raceResource]client.Object{}
	for _, r := range resources {
		obj := client.Object{Metadata: client.ObjectMeta{Name: r.name,
			Labels: map[string]string{"shared": "init"}, Annotations: map[string]string{"note": "created"}}}
		if r.plural == "nodes" {
			obj.Spec = json.RawMessage(`{"org":"race"}`)
		}
		out, err := admin.Resources(r.plural, "").Create(ctx, obj)
		require.NoError(t, err)
		created[r] = out
	}

	seed := uint64(time.Now().UnixNano())
	t.Logf("patch seed %d", seed)
	tally := &raceTally{}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range clients {
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		c, err := client.New(urls[w%servers], token, &http.Client{Transport: tr, Timeout: time.Minute})
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			<-start
			for r := range rounds {
				raceOne(ctx, c, tally, rng, resources[rng.IntN(len(resources))], w, r, r%3 == w%3)
			}
		}()
	}
	began := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(began)

	d, err := db.Open(ctx, db.Options{URL: dbURL, MaxConns: 2, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer d.Close()
	labelDups, err := findDuplicates(ctx, d, "labels")
	require.NoError(t, err)
	annotationDups, err := findDuplicates(ctx, d, "annotations")
	require.NoError(t, err)

	t.Logf("%d PATCHes from %d clients over %d replicas in %v: %d 2xx, %d 409 (of %d with a precondition), %d other; duplicate keys: %d labels, %d annotations",
		tally.requests, clients, servers, elapsed.Round(time.Millisecond), tally.ok, tally.conflicts, tally.preconditions,
		len(tally.failures), len(labelDups), len(annotationDups))
	require.Empty(t, tally.failures, "only 2xx, and 409 for a stale precondition, are acceptable")
	require.Equal(t, clients*rounds, tally.requests)
	require.Equal(t, tally.requests, tally.ok+tally.conflicts)
	require.Empty(t, labelDups, "no label key is stored twice")
	require.Empty(t, annotationDups, "no annotation key is stored twice")

	// The rows are what the API shows.
	final := map[raceResource]client.Object{}
	wantLabels, wantAnnotations := map[string]map[string]string{}, map[string]map[string]string{}
	for _, r := range resources {
		obj, err := admin.Resources(r.plural, "").Get(ctx, r.name)
		require.NoError(t, err)
		final[r] = obj
		id := obj.Kind + "/" + obj.Metadata.Org + "/" + obj.Metadata.Name
		if len(obj.Metadata.Labels) > 0 {
			wantLabels[id] = obj.Metadata.Labels
		}
		if len(obj.Metadata.Annotations) > 0 {
			wantAnnotations[id] = obj.Metadata.Annotations
		}
	}
	gotLabels, err := storedMetadata(ctx, d, "labels")
	require.NoError(t, err)
	require.Equal(t, wantLabels, gotLabels, "the label rows are what GET shows")
	gotAnnotations, err := storedMetadata(ctx, d, "annotations")
	require.NoError(t, err)
	require.Equal(t, wantAnnotations, gotAnnotations, "the annotation rows are what GET shows")

	// The acknowledged writes: a resourceVersion belongs to one object (a patch that changes
	// nothing answers the object's current version, so one version may be acknowledged more
	// than once, but only for that object and with the same answer); per object, in
	// resourceVersion order, each answer is the previous state with its patch applied (or, for
	// a patch that changed nothing, that state itself), and the last answer is the final object.
	seen := map[int64]raceResource{}
	byRes := map[raceResource][]ack{}
	for _, a := range tally.acks {
		prev, dup := seen[a.rv]
		require.False(t, dup && prev != a.res, "resourceVersion %d acknowledged for two objects (%s and %s)", a.rv, prev, a.res)
		seen[a.rv] = a.res
		byRes[a.res] = append(byRes[a.res], a)
	}
	replayed, stale, noops := 0, 0, 0
	for _, r := range resources {
		acks := byRes[r]
		require.NotEmpty(t, acks, "%s was written", r)
		slices.SortFunc(acks, func(a, b ack) int { return cmp.Compare(a.rv, b.rv) })

		// The final object is the answer to the last acknowledged write.
		last, got := acks[len(acks)-1].obj, final[r]
		assert.Equal(t, last.Kind, got.Kind)
		assert.JSONEq(t, string(last.Spec), string(got.Spec), "%s: spec", r)
		last.Spec, got.Spec = nil, nil
		last.Metadata.Labels, got.Metadata.Labels = nonNil(last.Metadata.Labels), nonNil(got.Metadata.Labels)
		last.Metadata.Annotations, got.Metadata.Annotations = nonNil(last.Metadata.Annotations), nonNil(got.Metadata.Annotations)
		assert.Equal(t, last, got, "%s: the final object is the answer to the last acknowledged write (rv %d)", r, acks[len(acks)-1].rv)

		// Each answer is the previous acknowledged object with the patch applied. The walk goes
		// on from each answer, so one stale answer is counted once.
		prev := created[r]
		writes := func(a ack, from client.Object) bool {
			return maps.Equal(applyPatch(from.Metadata.Labels, a.labels), nonNil(a.obj.Metadata.Labels)) &&
				maps.Equal(applyPatch(from.Metadata.Annotations, a.annotations), nonNil(a.obj.Metadata.Annotations))
		}
		for i := range acks {
			// Of the answers that share a version, the one that wrote it goes first.
			if i == 0 || acks[i-1].rv != acks[i].rv {
				for k := i + 1; k < len(acks) && acks[k].rv == acks[i].rv && !writes(acks[i], prev); k++ {
					if writes(acks[k], prev) {
						acks[i], acks[k] = acks[k], acks[i]
					}
				}
			}
			a := acks[i]
			replayed++
			if i > 0 && acks[i-1].rv == a.rv || a.obj.Metadata.ResourceVersion == prev.Metadata.ResourceVersion {
				// A patch that changed nothing: its answer is the state it found, and the
				// patch applied to that state is that state.
				noop := sameMeta(a.obj, prev) && sameMeta(prev, client.Object{Metadata: client.ObjectMeta{
					Labels: applyPatch(prev.Metadata.Labels, a.labels), Annotations: applyPatch(prev.Metadata.Annotations, a.annotations)}})
				if !noop {
					stale++
					t.Errorf("%s: the answer at rv %d repeats a version but is not a patch that changed nothing: answer labels %v annotations %v, state labels %v annotations %v",
						r, a.rv, a.obj.Metadata.Labels, a.obj.Metadata.Annotations, prev.Metadata.Labels, prev.Metadata.Annotations)
				}
				noops++
				continue
			}
			if !writes(a, prev) {
				wantLabels, wantAnnotations := applyPatch(prev.Metadata.Labels, a.labels), applyPatch(prev.Metadata.Annotations, a.annotations)
				stale++
				if stale <= 3 {
					lp, _ := json.Marshal(a.labels)
					ap, _ := json.Marshal(a.annotations)
					t.Errorf("%s: the answer at rv %d is not the object at rv %s with its patch applied:\n  before:  labels %v annotations %v\n  patch:   labels %s annotations %s\n  want:    labels %v annotations %v\n  answer:  labels %v annotations %v",
						r, a.rv, prev.Metadata.ResourceVersion, prev.Metadata.Labels, prev.Metadata.Annotations, lp, ap,
						wantLabels, wantAnnotations, a.obj.Metadata.Labels, a.obj.Metadata.Annotations)
				}
			}
			prev = a.obj
		}
	}
	t.Logf("%d of %d acknowledged writes answered an object that is not the previous one with the patch applied; %d changed nothing", stale, replayed, noops)
	require.Zero(t, stale, "no acknowledged write is computed from a stale object")
}

// raceOne sends one PATCH of res's labels and annotations for worker w's round r, with the
// resourceVersion just read as a precondition when precondition is set, and tallies the
// outcome.
func raceOne(ctx context.Context, c *client.Client, tally *raceTally, rng *rand.Rand, res raceResource, w, r int, precondition bool) {
	value := fmt.Sprintf("w%02d-r%d", w, r)
	a := ack{
		res:         res,
		labels:      racePatchKeys(rng, raceLabelKeys, value),
		annotations: racePatchKeys(rng, raceAnnotationKeys, "annotation by worker "+value),
	}
	meta := map[string]any{"labels": a.labels, "annotations": a.annotations}
	if precondition {
		cur, err := c.Resources(res.plural, "").Get(ctx, res.name)
		if err != nil {
			tally.fail("GET %s before a precondition: %v", res, err)
			return
		}
		meta["resourceVersion"] = cur.Metadata.ResourceVersion
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		tally.fail("encode patch: %v", err)
		return
	}
	body, _, err := c.DoRaw(ctx, client.Request{Method: http.MethodPatch, Path: "/v1/" + res.plural + "/" + res.name,
		RawBody: patch, ContentType: "application/merge-patch+json"})
	tally.mu.Lock()
	tally.requests++
	if precondition {
		tally.preconditions++
	}
	tally.mu.Unlock()
	var apiErr *client.Error
	switch {
	case err == nil:
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusConflict && precondition:
		tally.mu.Lock()
		tally.conflicts++
		tally.mu.Unlock()
		return
	case errors.As(err, &apiErr):
		problem, _ := json.Marshal(apiErr.Problem)
		tally.fail("PATCH %s %s: HTTP %d: problem %s body %q", res, patch, apiErr.Status, problem, apiErr.Body)
		return
	default:
		tally.fail("PATCH %s %s: %v", res, patch, err)
		return
	}
	if err := json.Unmarshal(body, &a.obj); err != nil {
		tally.fail("PATCH %s: decode the answer %q: %v", res, body, err)
		return
	}
	a.rv, err = strconv.ParseInt(a.obj.Metadata.ResourceVersion, 10, 64)
	if err != nil {
		tally.fail("PATCH %s: resourceVersion %q: %v", res, a.obj.Metadata.ResourceVersion, err)
		return
	}
	tally.mu.Lock()
	tally.ok++
	tally.acks = append(tally.acks, a)
	tally.mu.Unlock()
}

// TestMetadataRaceControl shows that findDuplicates, the check the race test relies on, does
// find duplicates when the write path makes them: on a labels table of the same shape but
// without the unique constraint, naive writers (SELECT, pause, INSERT when absent, in a
// transaction) released together each insert the same key.
func TestMetadataRaceControl(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const writers = 8
	d, err := db.Open(ctx, db.Options{URL: pgtest.NewEmptyDatabaseURL(t), Schema: "race_control", MaxConns: writers, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer d.Close()
	for _, stmt := range []string{
		`CREATE SCHEMA {{schema}}`,
		`CREATE TABLE {{schema}}.labels (
	resource_id bigint NOT NULL,
	key_prefix text NOT NULL DEFAULT '' COLLATE "C",
	key_name text NOT NULL COLLATE "C",
	value text NOT NULL
)`,
	} {
		_, err := d.Exec(ctx, &db.Query{Name: "RaceControlSetup", Text: stmt})
		require.NoError(t, err)
	}

	check := &db.Query{Name: "RaceControlCheck", Text: `SELECT count(*) FROM {{schema}}.labels WHERE resource_id = $1 AND key_prefix = $2 AND key_name = $3`}
	pause := &db.Query{Name: "RaceControlPause", Text: `SELECT pg_sleep(0.05)`}
	insert := &db.Query{Name: "RaceControlInsert", Text: `INSERT INTO {{schema}}.labels (resource_id, key_prefix, key_name, value) VALUES ($1, $2, $3, $4)`}
	keys := [][2]string{{"", "shared"}, {"example.com", "k"}}

	start := make(chan struct{})
	var ready, wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		ready.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			once := sync.OnceFunc(ready.Done)
			defer once()
			errs <- d.InTx(ctx, func(tx *db.Tx) error {
				// Hold a connection before the release, so all writers start at once.
				once()
				<-start
				for _, k := range keys {
					var n int64
					if err := tx.QueryRow(ctx, check, int64(1), k[0], k[1]).Scan(&n); err != nil {
						return err
					}
					if _, err := tx.Exec(ctx, pause); err != nil {
						return err
					}
					if n == 0 {
						if _, err := tx.Exec(ctx, insert, int64(1), k[0], k[1], fmt.Sprintf("w%d", w)); err != nil {
							return err
						}
					}
				}
				return nil
			})
		}()
	}
	ready.Wait()
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	dups, err := findDuplicates(ctx, d, "labels")
	require.NoError(t, err)
	t.Logf("control: %d naive writers without the unique constraint; findDuplicates reports %v", writers, dups)
	require.NotEmpty(t, dups, "the duplicate check finds the keys the naive writers stored twice")
}
