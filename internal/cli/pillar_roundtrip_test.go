package cli

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/client"
)

// TestPillarPayloadUnwrapsEnvelopes: the answer of `pillar get -o json|yaml` is stored as its
// data, the YAML data keeps its lines and columns (so the server's problems name the file's
// own positions) and is plain YAML; anything else is sent as written; an envelope that cannot
// be cut as written is refused rather than stored whole.
func TestPillarPayloadUnwrapsEnvelopes(t *testing.T) {
	t.Parallel()
	web01 := client.PillarTarget{Node: "web01"}
	yml := "category: apache\ndata:\n  apache:\n    port: 80 # a comment\nrevision: 2\ntarget: node/web01\nupdatedAt: \"2026-01-01T00:00:00Z\"\nupdatedBy: admin\n"
	doc, err := pillarPayload([]byte(yml), "a.yaml", web01, "apache")
	require.NoError(t, err)
	require.Equal(t, "application/yaml", doc.contentType)
	require.Equal(t, "#!yaml\n     \n  apache:\n    port: 80 # a comment\n\n\n\n\n", string(doc.body))

	doc, err = pillarPayload([]byte("data: {a: 1}\ncategory: apache\nrevision: 2\ntarget: node/web01\nupdatedAt: x\nupdatedBy: y\n"), "a.yml", web01, "apache")
	require.NoError(t, err)
	require.Equal(t, "      {a: 1}\n\n\n\n\n\n", string(doc.body))

	_, err = pillarPayload([]byte(`{category: apache, data: {a: 1}, revision: 2, target: node/web01, updatedAt: x, updatedBy: y}`), "a.yaml", web01, "apache")
	require.ErrorContains(t, err, "cannot be taken out as written")

	js := `{"target":"node/web01","category":"apache","data":{"n":12345678901234567890},"revision":1,"updatedAt":"x","updatedBy":"y"}`
	doc, err = pillarPayload([]byte(js), "stdin", web01, "apache")
	require.NoError(t, err)
	require.Equal(t, "application/json", doc.contentType)
	require.Equal(t, `{"n":12345678901234567890}`, string(doc.body))
	_, err = pillarPayload([]byte(js), "stdin", client.PillarTarget{Org: "acme", Group: "web"}, "apache")
	require.ErrorContains(t, err, "not for group/acme/web apache")
	require.ErrorContains(t, err, "strata pillar set apache --node web01 -f stdin")

	// A pillar that merely has a data key, or lacks one envelope key, is stored as written.
	for _, body := range []string{`{"data": {"a": 1}, "target": "x"}`, "target: node/web01\ncategory: apache\ndata: {}\n"} {
		doc, err = pillarPayload([]byte(body), "stdin", web01, "apache")
		require.NoError(t, err)
		require.Equal(t, body, string(doc.body))
	}
}
