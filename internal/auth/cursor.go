package auth

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
)

// cursorKeyName names the list-cursor key in server_keys.
const cursorKeyName = "list-cursor"

// errBadCursor is the answer to any continue token this server cannot open: garbage,
// tampered, sealed under another key, or issued for another list.
var errBadCursor = fault.Invalid("continue", "continue token is not one this server issued for this list; start again without continue")

// cursorAEAD returns the AES-GCM cipher of list cursors. The key lives in the database so
// that every replica seals and opens the same tokens; it is read (or, on a schema where no
// replica has stored one yet, created) once per process and cached.
func (s *Service) cursorAEAD(ctx context.Context) (cipher.AEAD, error) {
	s.cursorMu.Lock()
	defer s.cursorMu.Unlock()
	if s.cursor != nil {
		return s.cursor, nil
	}
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	var key []byte
	if err := s.db.QueryRow(ctx, q.Get("ServerKeyGetOrCreate"), cursorKeyName, db.Bytes(fresh)).Scan(&key); err != nil {
		return nil, fmt.Errorf("list cursor key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("list cursor key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	s.cursor = aead
	return aead, nil
}

// SealCursor returns an opaque continue token holding pos (the last key of a page), bound
// to list: the list's identity (family, parent and filter parameters, e.g. "orgs" or
// "audit?action=token.") is the AEAD's additional data, so a token opens only on the list
// that issued it and reveals nothing about the names it passed.
func (s *Service) SealCursor(ctx context.Context, list string, pos any) (string, error) {
	aead, err := s.cursorAEAD(ctx)
	if err != nil {
		return "", err
	}
	plain, err := json.Marshal(pos)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(aead.Seal(nonce, nonce, plain, []byte(list))), nil
}

// OpenCursor opens a token SealCursor issued for the same list into pos. Any other token is
// a 400 problem naming continue.
func (s *Service) OpenCursor(ctx context.Context, list, token string, pos any) error {
	aead, err := s.cursorAEAD(ctx)
	if err != nil {
		return err
	}
	if len(token) > 4096 {
		return errBadCursor
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) < aead.NonceSize()+aead.Overhead() {
		return errBadCursor
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], []byte(list))
	if err != nil {
		return errBadCursor
	}
	if err := json.Unmarshal(plain, pos); err != nil {
		return errBadCursor
	}
	return nil
}
