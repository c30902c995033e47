// Package secret is strata's encryption at rest (issue 22): envelope encryption with
// AES-256-GCM. Each value is encrypted with a fresh data key; the data key is wrapped by a
// key-encryption key (KEK) from the operator's key files; and both seals bind the value's
// logical identity (its associated data — for a pillar row its target and category, for a
// state version its project, workspace and serial), so a ciphertext moved to another row
// does not decrypt, while a backup restored or synced to an installation with the same key
// file still does.
//
// A Keyring holds the KEKs: the first encrypts, all decrypt, so keys rotate without
// downtime (start every replica with the new key first, re-wrap, retire the old one). A key
// is named by its id, the first 8 bytes of its SHA-256 in hex; a value whose key is missing
// fails with an error naming that id, never garbage and never an empty value.
//
// The sealed format (version 1): "sv1" | key id (8 bytes) | wrap nonce (12) | wrapped data
// key (32 + 16 tag) | value nonce (12) | value ciphertext + 16 tag.
package secret

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// KeySize is the size of a key-encryption key: 32 random bytes (AES-256).
const KeySize = 32

var magic = []byte("sv1")

const (
	idLen      = 8
	nonceLen   = 12
	wrappedLen = KeySize + 16
	headerLen  = 3 + idLen + nonceLen + wrappedLen + nonceLen
)

// Key is one key-encryption key.
type Key struct {
	ID  string // hex of the first 8 bytes of the key's SHA-256
	raw []byte
}

// NewKey makes a key from 32 bytes.
func NewKey(raw []byte) (Key, error) {
	if len(raw) != KeySize {
		return Key{}, fmt.Errorf("an encryption key is %d bytes, not %d", KeySize, len(raw))
	}
	sum := sha256.Sum256(raw)
	return Key{ID: hex.EncodeToString(sum[:idLen]), raw: bytes.Clone(raw)}, nil
}

// GenerateKeyFile writes a new random key to path (base64, mode 0600), refusing to overwrite.
func GenerateKeyFile(path string) (Key, error) {
	raw := make([]byte, KeySize)
	if _, err := rand.Read(raw); err != nil {
		return Key{}, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return Key{}, fmt.Errorf("create encryption key file: %w", err)
	}
	if _, err := f.WriteString(base64.StdEncoding.EncodeToString(raw) + "\n"); err != nil {
		f.Close()
		return Key{}, err
	}
	if err := f.Close(); err != nil {
		return Key{}, err
	}
	return NewKey(raw)
}

// ReadKeyFile reads a key file: 32 random bytes, base64 (standard or URL alphabet, padding
// optional), surrounding white space ignored. It refuses a file others may read.
func ReadKeyFile(path string) (Key, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Key{}, fmt.Errorf("encryption key file: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return Key{}, fmt.Errorf("encryption key file %s may be read by others (mode %04o): chmod 600 it", path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Key{}, fmt.Errorf("encryption key file: %w", err)
	}
	k, err := parseKey(string(b))
	if err != nil {
		return Key{}, fmt.Errorf("encryption key file %s %w", path, err)
	}
	return k, nil
}

// parseKey reads a key's text: 32 bytes in base64 (standard or URL alphabet, padding
// optional), surrounding white space ignored.
func parseKey(text string) (Key, error) {
	text = strings.TrimSpace(text)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if raw, err := enc.DecodeString(text); err == nil {
			k, err := NewKey(raw)
			if err != nil {
				return Key{}, fmt.Errorf("is not a key: %w", err)
			}
			return k, nil
		}
	}
	return Key{}, fmt.Errorf("is not base64 of %d bytes", KeySize)
}

// Keyring is the key-encryption keys a replica has: the first encrypts, all decrypt.
// Its keys can be replaced in place (Replace, on SIGHUP) while every service holding the ring
// keeps using it.
//
// It also carries what the last key check found missing (SetMissing): the ids of keys the
// database's values are sealed under that the ring does not hold. While any is missing,
// Require fails with a MissingKeysError, so a replica that cannot read every sealed value
// neither serves secrets nor seals new ones under a key the other replicas may lack.
type Keyring struct {
	mu      sync.RWMutex
	keys    []Key // never modified once stored: Replace stores a new slice
	missing atomic.Pointer[[]string]
}

// list returns the current keys; the slice is never modified afterwards.
func (r *Keyring) list() []Key {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.keys
}

// Replace makes r hold next's keys: what SIGHUP does after re-reading the key files and
// key commands, so the services holding r see the new keys at their next operation.
func (r *Keyring) Replace(next *Keyring) {
	keys := next.list()
	r.mu.Lock()
	r.keys = keys
	r.mu.Unlock()
}

// NoKeys is the keyring of a replica given no key: Require fails with ErrNoKey, or with a
// MissingKeysError once a key check found keys the database references.
func NoKeys() *Keyring { return &Keyring{} }

// SetMissing records the ids of keys the database references that the ring lacks (none:
// nil or empty), as the key check (package server) found them.
func (r *Keyring) SetMissing(ids []string) {
	ids = slices.Clone(ids)
	r.missing.Store(&ids)
}

// Missing returns the ids the last key check found missing (nil when none).
func (r *Keyring) Missing() []string {
	if r == nil {
		return nil
	}
	if m := r.missing.Load(); m != nil && len(*m) > 0 {
		return slices.Clone(*m)
	}
	return nil
}

// MissingKeysError is a secret read or write on a replica that lacks keys the database's
// values are sealed under. It names the ids and the flags that give a replica its keys.
type MissingKeysError struct {
	IDs []string
}

func (e *MissingKeysError) Error() string {
	return fmt.Sprintf("the database holds values sealed under encryption key %s, which this replica does not hold: "+
		"restart it with --encryption-key-file FILE (or --encryption-key-command CMD) giving every key the data references "+
		"(strata keys status; docs/operations.md, \"Keys as facts\")", strings.Join(e.IDs, ", "))
}

// Is makes a MissingKeysError an ErrMissingKey.
func (e *MissingKeysError) Is(target error) bool { return target == ErrMissingKey }

// NewKeyring makes a keyring; the first key encrypts new values. Two keys with one id are one
// key given twice.
func NewKeyring(keys ...Key) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("no encryption key")
	}
	seen := map[string]bool{}
	r := &Keyring{}
	for _, k := range keys {
		if !seen[k.ID] {
			seen[k.ID] = true
			r.keys = append(r.keys, k)
		}
	}
	return r, nil
}

// Primary is the id of the key new values are encrypted with ("" for a ring without keys).
func (r *Keyring) Primary() string {
	keys := r.list()
	if len(keys) == 0 {
		return ""
	}
	return keys[0].ID
}

// IDs are the ids of every key the ring holds, the primary first.
func (r *Keyring) IDs() []string {
	keys := r.list()
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.ID
	}
	return out
}

func (r *Keyring) key(id string) (Key, bool) {
	for _, k := range r.list() {
		if k.ID == id {
			return k, true
		}
	}
	return Key{}, false
}

// ErrMissingKey is a sealed value whose key-encryption key the keyring does not hold.
var ErrMissingKey = errors.New("encryption key missing")

// ErrTampered is a sealed value that does not open: altered, truncated, or bound to another
// identity (moved to another row).
var ErrTampered = errors.New("encrypted value does not open")

func gcm(key []byte) cipher.AEAD {
	block, err := aes.NewCipher(key)
	if err != nil {
		panic(err) // keys are 32 bytes by construction
	}
	a, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return a
}

// wrapAAD binds a wrapped data key to its key id and to the value's identity.
func wrapAAD(id []byte, aad []byte) []byte {
	return append(append(append([]byte("strata data key\x00"), id...), 0), aad...)
}

// Seal encrypts plaintext bound to aad (the value's logical identity) with a fresh data key
// wrapped by the primary key.
func (r *Keyring) Seal(plaintext, aad []byte) ([]byte, error) {
	if err := r.Require(); err != nil {
		return nil, err
	}
	kek := r.list()[0]
	id, _ := hex.DecodeString(kek.ID)
	dek := make([]byte, KeySize)
	wrapNonce := make([]byte, nonceLen)
	valueNonce := make([]byte, nonceLen)
	for _, b := range [][]byte{dek, wrapNonce, valueNonce} {
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
	}
	out := make([]byte, 0, headerLen+len(plaintext)+16)
	out = append(out, magic...)
	out = append(out, id...)
	out = append(out, wrapNonce...)
	out = gcm(kek.raw).Seal(out, wrapNonce, dek, wrapAAD(id, aad))
	out = append(out, valueNonce...)
	return gcm(dek).Seal(out, valueNonce, plaintext, aad), nil
}

// IsSealed reports whether b is in the sealed format (it may still fail to open).
func IsSealed(b []byte) bool { return len(b) >= headerLen+16 && bytes.HasPrefix(b, magic) }

// KeyID returns the id of the key a sealed value was wrapped with.
func KeyID(sealed []byte) (string, error) {
	if !IsSealed(sealed) {
		return "", ErrTampered
	}
	return hex.EncodeToString(sealed[3 : 3+idLen]), nil
}

// Open decrypts a sealed value bound to aad. A value whose key the ring lacks is
// ErrMissingKey naming the key id; one that does not open (altered, or another row's) is
// ErrTampered.
func (r *Keyring) Open(sealed, aad []byte) ([]byte, error) {
	id, err := KeyID(sealed)
	if err != nil {
		return nil, err
	}
	kek, ok := r.key(id)
	if !ok {
		return nil, fmt.Errorf("%w: the value was encrypted with key %s, which none of the key files given holds (keys: %s)", ErrMissingKey, id, strings.Join(r.IDs(), ", "))
	}
	rawID := sealed[3 : 3+idLen]
	p := 3 + idLen
	wrapNonce := sealed[p : p+nonceLen]
	p += nonceLen
	dek, err := gcm(kek.raw).Open(nil, wrapNonce, sealed[p:p+wrappedLen], wrapAAD(rawID, aad))
	if err != nil {
		return nil, ErrTampered
	}
	p += wrappedLen
	valueNonce := sealed[p : p+nonceLen]
	p += nonceLen
	plain, err := gcm(dek).Open(nil, valueNonce, sealed[p:], aad)
	if err != nil {
		return nil, ErrTampered
	}
	return plain, nil
}

// Rewrap re-wraps a sealed value's data key with the primary key, leaving the value's own
// ciphertext as it is (rotation touches 80 bytes per value, whatever its size). A value
// already under the primary key is returned unchanged.
func (r *Keyring) Rewrap(sealed, aad []byte) ([]byte, error) {
	id, err := KeyID(sealed)
	if err != nil {
		return nil, err
	}
	if id == r.Primary() {
		return sealed, nil
	}
	old, ok := r.key(id)
	if !ok {
		return nil, fmt.Errorf("%w: the value was encrypted with key %s, which none of the key files given holds", ErrMissingKey, id)
	}
	p := 3 + idLen
	dek, err := gcm(old.raw).Open(nil, sealed[p:p+nonceLen], sealed[p+nonceLen:p+nonceLen+wrappedLen], wrapAAD(sealed[3:3+idLen], aad))
	if err != nil {
		return nil, ErrTampered
	}
	kek := r.list()[0]
	newID, _ := hex.DecodeString(kek.ID)
	wrapNonce := make([]byte, nonceLen)
	if _, err := rand.Read(wrapNonce); err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(sealed))
	out = append(out, magic...)
	out = append(out, newID...)
	out = append(out, wrapNonce...)
	out = gcm(kek.raw).Seal(out, wrapNonce, dek, wrapAAD(newID, aad))
	return append(out, sealed[headerLen-nonceLen:]...), nil
}
