package provider_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/cmd/terraform-provider-strata/internal/provider"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/secret"
	"github.com/stratahq/strata/internal/server"
)

func TestMain(m *testing.M) {
	code := pgtest.Run(m)
	// The CLI configuration useTerraform wrote, once for the process, goes with it.
	if terraformEnv.dir != "" {
		_ = os.RemoveAll(terraformEnv.dir)
	}
	os.Exit(code)
}

// factories run the provider in the test process: terraform reattaches to it, so nothing is
// installed or downloaded for strata.
var factories = map[string]func() (tfprotov6.ProviderServer, error){
	"strata": providerserver.NewProtocol6WithError(provider.New("test")()),
}

var terraformEnv struct {
	once sync.Once
	err  error
	dir  string // the CLI configuration's directory, removed by TestMain
}

// useTerraform points terraform-plugin-testing at the terraform on PATH and fails the test
// without one. Left to itself the framework skips without TF_ACC, and without
// TF_ACC_TERRAFORM_PATH downloads the latest terraform (offline: the test binary exits), so
// the variables are set here, once for the process (the tests run in parallel), and a
// missing terraform is a failure, never a skip. TF_ACC_PROVIDER_NAMESPACE makes the
// in-process provider answer for stratahq/strata, the source the configurations declare as
// users do; TF_CLI_CONFIG_FILE keeps the user's CLI configuration (dev_overrides, mirrors)
// out of the tests.
func useTerraform(t *testing.T) {
	t.Helper()
	terraformEnv.once.Do(func() {
		path, err := exec.LookPath("terraform")
		if err != nil {
			terraformEnv.err = fmt.Errorf("the provider's acceptance tests need terraform on PATH (tested with 1.11.4): %w", err)
			return
		}
		dir, err := os.MkdirTemp("", "strata-tfacc-")
		if err != nil {
			terraformEnv.err = err
			return
		}
		terraformEnv.dir = dir
		rc := filepath.Join(dir, "terraformrc")
		if err := os.WriteFile(rc, []byte("# no dev_overrides, no mirrors: the tests reattach to the provider in process\n"), 0o600); err != nil {
			terraformEnv.err = err
			return
		}
		for k, v := range map[string]string{
			"TF_ACC":                    "1",
			"TF_ACC_TERRAFORM_PATH":     path,
			"TF_ACC_PROVIDER_NAMESPACE": "stratahq",
			"TF_CLI_CONFIG_FILE":        rc,
			"CHECKPOINT_DISABLE":        "1",
		} {
			if err := os.Setenv(k, v); err != nil {
				terraformEnv.err = err
				return
			}
		}
		// TF_ACC_TERRAFORM_VERSION would make the framework download that version anyway.
		terraformEnv.err = os.Unsetenv("TF_ACC_TERRAFORM_VERSION")
	})
	require.NoError(t, terraformEnv.err)
}

// strata is a real strata server (internal/server, as `strata serve` runs it) on a fresh
// PostgreSQL database, with an encryption key so secret categories work.
type strata struct {
	url   string
	admin string
	c     *client.Client
}

func startStrata(t *testing.T) *strata {
	t.Helper()
	dbURL := pgtest.NewDatabaseURL(t)
	keyFile := filepath.Join(t.TempDir(), "encryption-key")
	_, err := secret.GenerateKeyFile(keyFile)
	require.NoError(t, err)
	raw := make([]byte, 32)
	_, err = rand.Read(raw)
	require.NoError(t, err)
	admin := "strata_" + base64.RawURLEncoding.EncodeToString(raw)

	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- server.Run(ctx, server.Config{
			Listen: "127.0.0.1:0", DatabaseURL: dbURL, DataDir: t.TempDir(),
			BootstrapToken: admin, EncryptionKeyFiles: []string{keyFile},
			Logger: slog.New(slog.DiscardHandler), ShutdownTimeout: 5 * time.Second,
			Ready: func(a net.Addr) { addrc <- a },
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-errc:
		case <-time.After(30 * time.Second):
			t.Error("strata did not stop")
		}
	})
	var url string
	select {
	case a := <-addrc:
		url = "http://" + a.String()
	case err := <-errc:
		errc <- err
		t.Fatalf("strata did not start: %v", err)
	case <-time.After(90 * time.Second):
		t.Fatal("strata did not start in 90s")
	}
	c, err := client.New(url, admin, nil)
	require.NoError(t, err)
	return &strata{url: url, admin: admin, c: c}
}

// providerBlock is the head of every test configuration: the provider as users declare it.
func (s *strata) providerBlock(token string) string {
	if token == "" {
		token = s.admin
	}
	return fmt.Sprintf(`
terraform {
  required_providers {
    strata = { source = "stratahq/strata" }
  }
}

provider "strata" {
  server = %q
  token  = %q
}
`, s.url, token)
}
