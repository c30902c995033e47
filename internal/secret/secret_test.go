package secret_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/secret"
)

func newKey(t testing.TB) secret.Key {
	t.Helper()
	raw := make([]byte, secret.KeySize)
	_, err := rand.Read(raw)
	require.NoError(t, err)
	k, err := secret.NewKey(raw)
	require.NoError(t, err)
	return k
}

// TestSealOpen: a value opens with its identity and a ring holding its key; moved to another
// identity, altered or truncated it does not; without its key it fails naming the key id.
func TestSealOpen(t *testing.T) {
	t.Parallel()
	a := newKey(t)
	ring, err := secret.NewKeyring(a)
	require.NoError(t, err)
	aad := []byte("pillar\x00node/web01\x00creds")
	sealed, err := ring.Seal([]byte(`{"password":"hunter2"}`), aad)
	require.NoError(t, err)
	require.True(t, secret.IsSealed(sealed))
	require.False(t, bytes.Contains(sealed, []byte("hunter2")))
	plain, err := ring.Open(sealed, aad)
	require.NoError(t, err)
	require.Equal(t, `{"password":"hunter2"}`, string(plain))

	_, err = ring.Open(sealed, []byte("pillar\x00node/web02\x00creds"))
	require.ErrorIs(t, err, secret.ErrTampered, "a value moved to another row does not open")
	for _, at := range []int{5, 40, len(sealed) - 1} {
		bad := bytes.Clone(sealed)
		bad[at] ^= 1
		_, err = ring.Open(bad, aad)
		require.Error(t, err, "byte %d altered", at)
	}
	_, err = ring.Open(sealed[:len(sealed)-1], aad)
	require.Error(t, err)

	other, err := secret.NewKeyring(newKey(t))
	require.NoError(t, err)
	_, err = other.Open(sealed, aad)
	require.ErrorIs(t, err, secret.ErrMissingKey)
	require.Contains(t, err.Error(), a.ID, "the error names the missing key")

	// Two seals of one value differ (fresh data key and nonces).
	again, err := ring.Seal([]byte(`{"password":"hunter2"}`), aad)
	require.NoError(t, err)
	require.NotEqual(t, sealed, again)
}

// TestRotation: with the new key first and the old one still given, old values open and new
// ones are sealed with the new key; Rewrap moves an old value's data key to the new key
// without touching its ciphertext, after which the old key can go.
func TestRotation(t *testing.T) {
	t.Parallel()
	oldKey, newK := newKey(t), newKey(t)
	before, err := secret.NewKeyring(oldKey)
	require.NoError(t, err)
	aad := []byte("state\x00infra\x00prod\x007")
	v, err := before.Seal([]byte("state bytes"), aad)
	require.NoError(t, err)

	during, err := secret.NewKeyring(newK, oldKey)
	require.NoError(t, err)
	require.Equal(t, newK.ID, during.Primary())
	plain, err := during.Open(v, aad)
	require.NoError(t, err)
	require.Equal(t, "state bytes", string(plain))
	fresh, err := during.Seal([]byte("new"), aad)
	require.NoError(t, err)
	id, err := secret.KeyID(fresh)
	require.NoError(t, err)
	require.Equal(t, newK.ID, id)

	moved, err := during.Rewrap(v, aad)
	require.NoError(t, err)
	require.Equal(t, v[len(v)-20:], moved[len(moved)-20:], "the value's ciphertext is untouched")
	same, err := during.Rewrap(moved, aad)
	require.NoError(t, err)
	require.Equal(t, moved, same, "a value under the primary key is left as it is")

	after, err := secret.NewKeyring(newK)
	require.NoError(t, err)
	plain, err = after.Open(moved, aad)
	require.NoError(t, err)
	require.Equal(t, "state bytes", string(plain))
	_, err = after.Open(v, aad)
	require.ErrorIs(t, err, secret.ErrMissingKey, "a value not re-wrapped needs the old key")
	_, err = during.Rewrap(v, []byte("another row"))
	require.ErrorIs(t, err, secret.ErrTampered)
}

// TestKeyFiles: a generated key file is base64 of 32 bytes, mode 0600, never overwritten; a key
// file others may read, or of the wrong size, is refused.
func TestKeyFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "encryption-key")
	k, err := secret.GenerateKeyFile(p)
	require.NoError(t, err)
	st, err := os.Stat(p)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	_, err = secret.GenerateKeyFile(p)
	require.Error(t, err, "never overwrites a key")
	read, err := secret.ReadKeyFile(p)
	require.NoError(t, err)
	require.Equal(t, k.ID, read.ID)

	require.NoError(t, os.Chmod(p, 0o644))
	_, err = secret.ReadKeyFile(p)
	require.ErrorContains(t, err, "chmod 600")

	short := filepath.Join(dir, "short")
	require.NoError(t, os.WriteFile(short, []byte(base64.StdEncoding.EncodeToString([]byte("too short"))), 0o600))
	_, err = secret.ReadKeyFile(short)
	require.Error(t, err)
	url := filepath.Join(dir, "url")
	raw := bytes.Repeat([]byte{0xfb}, secret.KeySize)
	require.NoError(t, os.WriteFile(url, []byte(base64.RawURLEncoding.EncodeToString(raw)+"\n"), 0o600))
	_, err = secret.ReadKeyFile(url)
	require.NoError(t, err, "URL-safe base64 without padding is read too")
}

// FuzzOpen: no input makes Open or Rewrap panic, and only a real seal opens.
func FuzzOpen(f *testing.F) {
	raw := bytes.Repeat([]byte{7}, secret.KeySize)
	k, _ := secret.NewKey(raw)
	ring, _ := secret.NewKeyring(k)
	sealed, _ := ring.Seal([]byte("x"), []byte("a"))
	f.Add(sealed, []byte("a"))
	f.Add([]byte("sv1"), []byte(""))
	f.Fuzz(func(t *testing.T, b, aad []byte) {
		if plain, err := ring.Open(b, aad); err == nil {
			require.Equal(t, "x", string(plain))
		}
		_, _ = ring.Rewrap(b, aad)
		_, _ = secret.KeyID(b)
	})
}

// BenchmarkSealOpen: one value of 1 KB (a pillar row) sealed and opened, the work a secret
// row adds to a write and to a revealing render; and Rewrap, a rotation's work per value.
func BenchmarkSealOpen(b *testing.B) {
	raw := make([]byte, secret.KeySize)
	_, _ = rand.Read(raw)
	k, _ := secret.NewKey(raw)
	r, _ := secret.NewKeyring(k)
	plain := bytes.Repeat([]byte("x"), 1024)
	aad := []byte("strata pillar\x00node/web01\x00creds")
	sealed, _ := r.Seal(plain, aad)
	b.Run("seal", func(b *testing.B) {
		b.SetBytes(int64(len(plain)))
		for i := 0; i < b.N; i++ {
			if _, err := r.Seal(plain, aad); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("open", func(b *testing.B) {
		b.SetBytes(int64(len(plain)))
		for i := 0; i < b.N; i++ {
			if _, err := r.Open(sealed, aad); err != nil {
				b.Fatal(err)
			}
		}
	})
	raw2 := make([]byte, secret.KeySize)
	_, _ = rand.Read(raw2)
	k2, _ := secret.NewKey(raw2)
	r2, _ := secret.NewKeyring(k2, k)
	b.Run("rewrap", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := r2.Rewrap(sealed, aad); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestKeyFromCommand: a key command's standard output is the key (as in a key file); a
// command that fails is an error carrying its stderr, one that prints something else an error
// saying so, and commands' keys come before files' keys in the ring.
func TestKeyFromCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "k")
	fk, err := secret.GenerateKeyFile(file)
	require.NoError(t, err)
	raw := make([]byte, secret.KeySize)
	_, _ = rand.Read(raw)
	want, err := secret.NewKey(raw)
	require.NoError(t, err)
	cmd := "printf '%s\\n' " + base64.StdEncoding.EncodeToString(raw)
	k, err := secret.KeyFromCommand(context.Background(), cmd)
	require.NoError(t, err)
	require.Equal(t, want.ID, k.ID)

	_, err = secret.KeyFromCommand(context.Background(), "echo 'kms: access denied' >&2; exit 3")
	require.ErrorContains(t, err, "kms: access denied")
	_, err = secret.KeyFromCommand(context.Background(), "echo not-a-key")
	require.ErrorContains(t, err, "is not base64 of 32 bytes")

	ring, err := secret.LoadKeys(context.Background(), []string{cmd}, []string{file})
	require.NoError(t, err)
	require.Equal(t, []string{want.ID, fk.ID}, ring.IDs(), "the command's key is the primary")
}

// TestReplaceUnderLoad (issue 28, item 1): SIGHUP swaps a running replica's keys in place
// (Keyring.Replace) while requests seal and open with the same ring; under the race detector
// nothing races, values sealed before stay readable when the new ring holds their key, and
// new values are sealed under the new primary.
func TestReplaceUnderLoad(t *testing.T) {
	t.Parallel()
	kOld, kNew := newKey(t), newKey(t)
	ring, err := secret.NewKeyring(kOld)
	require.NoError(t, err)
	before, err := ring.Seal([]byte("v"), []byte("row"))
	require.NoError(t, err)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				sealed, err := ring.Seal([]byte("x"), []byte("aad"))
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := ring.Open(sealed, []byte("aad")); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	next, err := secret.NewKeyring(kNew, kOld)
	require.NoError(t, err)
	ring.Replace(next)
	close(stop)
	wg.Wait()
	require.Equal(t, kNew.ID, ring.Primary())
	require.Equal(t, []string{kNew.ID, kOld.ID}, ring.IDs())
	plain, err := ring.Open(before, []byte("row"))
	require.NoError(t, err)
	require.Equal(t, "v", string(plain))
	after, err := ring.Seal([]byte("w"), []byte("row"))
	require.NoError(t, err)
	id, err := secret.KeyID(after)
	require.NoError(t, err)
	require.Equal(t, kNew.ID, id)
}

// TestMissingKeysRefuse (issue 28): once the key check records keys the database references
// that a ring lacks, the ring neither seals nor lets anything be opened through Require: a
// 503 with reason keys naming the ids — also for a replica with no key at all, which says
// which keys it needs rather than only that it has none.
func TestMissingKeysRefuse(t *testing.T) {
	t.Parallel()
	k := newKey(t)
	r, err := secret.NewKeyring(k)
	require.NoError(t, err)
	require.NoError(t, r.Require())
	r.SetMissing([]string{"00000000000000a1", "00000000000000a2"})
	require.Equal(t, []string{"00000000000000a1", "00000000000000a2"}, r.Missing())
	for _, err := range []error{r.Require(), func() error { _, err := r.Seal([]byte("x"), nil); return err }()} {
		var missing *secret.MissingKeysError
		require.ErrorAs(t, err, &missing)
		require.ErrorIs(t, err, secret.ErrMissingKey)
		var f *fault.Error
		require.ErrorAs(t, secret.Fault(err), &f)
		require.Equal(t, fault.KindUnavailable, f.Kind)
		require.Equal(t, fault.ReasonKeys, fault.ReasonOf(f))
		for _, want := range []string{"00000000000000a1, 00000000000000a2", "--encryption-key-file", "--encryption-key-command"} {
			require.Contains(t, f.Detail, want)
		}
	}
	r.SetMissing(nil)
	require.NoError(t, r.Require(), "held again")

	none := secret.NoKeys()
	require.ErrorIs(t, none.Require(), secret.ErrNoKey)
	require.Empty(t, none.Primary())
	require.Empty(t, none.IDs())
	_, err = none.Seal([]byte("x"), nil)
	require.ErrorIs(t, err, secret.ErrNoKey)
	none.SetMissing([]string{k.ID})
	require.ErrorIs(t, none.Require(), secret.ErrMissingKey)
	require.Contains(t, none.Require().Error(), k.ID)
}
