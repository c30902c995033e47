package main_test

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/client"
)

// upstreamConfig is a configuration on strata's http backend whose one resource holds a
// secret (a sensitive input of a terraform_data) and whose outputs do not include it.
func upstreamConfig(serverURL, project, secret string) string {
	addr := serverURL + "/v1/state/" + project + "/default"
	return fmt.Sprintf(`terraform {
  backend "http" {
    address        = %[1]q
    lock_address   = %[1]q
    unlock_address = %[1]q
    username       = "strata"
  }
}

resource "terraform_data" "db" {
  input = sensitive(%[2]q)
}

output "endpoint" {
  value = "db-${terraform_data.db.id}.internal:5432"
}

output "port" {
  value = 5432
}

output "api_key" {
  value     = "key-shared-with-downstream"
  sensitive = true
}
`, addr, secret)
}

// downstreamConfig reads the upstream's outputs through data "terraform_remote_state" with
// backend "http" and the token in var.upstream_token, the way docs/terraform.md shows.
// terraform_remote_state hands sensitive outputs over as plain values (Terraform 1.11 does
// not carry the mark across), so the downstream marks api_key sensitive itself.
func downstreamConfig(serverURL, project string) string {
	addr := serverURL + "/v1/state/" + project + "/default"
	return fmt.Sprintf(`variable "upstream_token" {
  type      = string
  sensitive = true
}

data "terraform_remote_state" "up" {
  backend = "http"
  config = {
    address  = %[1]q
    username = "strata"
    password = var.upstream_token
  }
}

output "endpoint" {
  value = data.terraform_remote_state.up.outputs.endpoint
}

output "port" {
  value = data.terraform_remote_state.up.outputs.port
}

output "api_key" {
  value     = sensitive(data.terraform_remote_state.up.outputs.api_key)
  sensitive = true
}
`, addr)
}

type tfOutput struct {
	Sensitive bool            `json:"sensitive"`
	Value     json.RawMessage `json:"value"`
}

func outputsOf(t *testing.T, r *tfRun) map[string]tfOutput {
	t.Helper()
	var out map[string]tfOutput
	require.NoError(t, json.Unmarshal([]byte(r.stdout("output", "-json")), &out))
	return out
}

// getState GETs the upstream state with token as HTTP Basic password, as Terraform does.
func getState(t *testing.T, serverURL, project, token string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, serverURL+"/v1/state/"+project+"/default", nil)
	require.NoError(t, err)
	req.SetBasicAuth("strata", token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, body
}

// stateHead is what an outputs-only read must keep of the stored state.
type stateHead struct {
	Version          int                        `json:"version"`
	TerraformVersion string                     `json:"terraform_version"`
	Serial           int64                      `json:"serial"`
	Lineage          string                     `json:"lineage"`
	Outputs          map[string]json.RawMessage `json:"outputs"`
	Resources        []json.RawMessage          `json:"resources"`
}

// TestTerraformRemoteStateOutputsOnly: with the real terraform, a downstream configuration
// reads an upstream's outputs through data "terraform_remote_state" (backend "http") and a
// token holding only state:read-outputs, created with `strata token create --scope`. The
// downstream's outputs equal the upstream's, the sensitive one included; the GET
// that token makes carries the upstream's lineage, serial and outputs but no resource and
// not the secret the full state holds; `terraform state pull` with it shows no resource; and
// terraform cannot write, lock or list versions with it.
func TestTerraformRemoteStateOutputsOnly(t *testing.T) {
	t.Parallel()
	s, admin, _ := stateServer(t)
	ctx := context.Background()
	c, err := client.New(s.url, admin, nil)
	require.NoError(t, err)
	_, err = c.ProjectPut(ctx, "net")
	require.NoError(t, err)
	rnd := make([]byte, 8)
	_, _ = rand.Read(rnd)
	secret := "s3cr3t-" + hex.EncodeToString(rnd)

	up := newTF(t, upstreamConfig(s.url, "net", secret), "TF_HTTP_PASSWORD="+admin)
	up.ok("init", "-no-color")
	up.ok("apply", "-auto-approve", "-no-color")
	upOut := outputsOf(t, up)

	help, err := cli(t, nil, "token", "create", "--help")
	require.NoError(t, err)
	require.Contains(t, help, "state:read-outputs:")
	out, err := cli(t, []string{"STRATA_SERVER=" + s.url, "STRATA_TOKEN=" + admin},
		"token", "create", "downstream", "--scope", "state:read-outputs:net", "-o", "json")
	require.NoError(t, err)
	var tok client.Token
	require.NoError(t, json.Unmarshal([]byte(out), &tok))
	require.Equal(t, []string{"state:read-outputs:net"}, tok.Scopes)

	// The control: the full state holds the secret, so its absence below means something.
	status, _, full := getState(t, s.url, "net", admin)
	require.Equal(t, 200, status)
	require.Contains(t, string(full), secret)

	// The outputs-only GET: the same head and outputs, no resource, no secret, and a
	// Content-MD5 of the bytes sent.
	status, hdr, body := getState(t, s.url, "net", tok.Secret)
	require.Equal(t, 200, status, string(body))
	require.NotContains(t, string(body), secret)
	require.NotContains(t, string(body), "terraform_data")
	sum := md5.Sum(body)
	require.Equal(t, base64.StdEncoding.EncodeToString(sum[:]), hdr.Get("Content-MD5"))
	var fullHead, got stateHead
	require.NoError(t, json.Unmarshal(full, &fullHead))
	require.NoError(t, json.Unmarshal(body, &got))
	require.NotEmpty(t, fullHead.Resources)
	require.NotNil(t, got.Resources)
	require.Empty(t, got.Resources)
	require.Equal(t, fullHead.Version, got.Version)
	require.Equal(t, fullHead.TerraformVersion, got.TerraformVersion)
	require.Equal(t, fullHead.Serial, got.Serial)
	require.Equal(t, fullHead.Lineage, got.Lineage)
	require.Len(t, got.Outputs, 3)
	for name, o := range fullHead.Outputs {
		require.JSONEq(t, string(o), string(got.Outputs[name]), "output %s as stored", name)
	}

	// The downstream reads the upstream's outputs through the outputs-only token.
	down := newTF(t, downstreamConfig(s.url, "net"), "TF_VAR_upstream_token="+tok.Secret)
	down.ok("init", "-no-color")
	down.ok("apply", "-auto-approve", "-no-color")
	downOut := outputsOf(t, down)
	require.Len(t, downOut, 3)
	for _, name := range []string{"endpoint", "port", "api_key"} {
		require.JSONEq(t, string(upOut[name].Value), string(downOut[name].Value), "downstream output %s", name)
	}
	require.Contains(t, string(downOut["endpoint"].Value), "db-")
	require.True(t, upOut["api_key"].Sensitive)
	require.JSONEq(t, `"key-shared-with-downstream"`, string(downOut["api_key"].Value), "sensitive outputs are included")

	// terraform state pull with the token shows no resource.
	pull := newTF(t, upstreamConfig(s.url, "net", secret), "TF_HTTP_PASSWORD="+tok.Secret)
	pull.ok("init", "-no-color")
	pulled := pull.stdout("state", "pull")
	require.NotContains(t, pulled, secret)
	var pulledHead stateHead
	require.NoError(t, json.Unmarshal([]byte(pulled), &pulledHead))
	require.Empty(t, pulledHead.Resources)
	require.Equal(t, fullHead.Lineage, pulledHead.Lineage)
	require.Empty(t, strings.TrimSpace(pull.stdout("state", "list")))

	// Terraform cannot write with it: the apply's LOCK is refused, and nothing changed.
	// (Terraform's http backend reports a refused LOCK as "invalid auth".)
	out, err = pull.run("apply", "-auto-approve", "-no-color", "-lock-timeout=0s")
	require.Error(t, err, out)
	require.Contains(t, out, "Error acquiring the state lock")
	require.Contains(t, out, "invalid auth")
	out, err = pull.run("apply", "-auto-approve", "-no-color", "-lock=false")
	require.Error(t, err, out)
	require.Contains(t, out, "Error saving state: HTTP error: 403")
	status, _, after := getState(t, s.url, "net", admin)
	require.Equal(t, 200, status)
	require.Equal(t, string(full), string(after), "refused writes leave the state as it was")
	vs, err := c.StateVersions(ctx, "net", "default")
	require.NoError(t, err)
	require.Len(t, vs, 1)
	reader, err := client.New(s.url, tok.Secret, nil)
	require.NoError(t, err)
	_, err = reader.StateVersions(ctx, "net", "default")
	require.ErrorContains(t, err, "403")
	_, err = reader.StateLock(ctx, "net", "default", client.LockInfo{ID: "x", Created: time.Now().UTC()})
	require.ErrorContains(t, err, "403")
}
