package main

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// secretFile is where a dev stack keeps its secret when LECTERN_SECRET is
// unset.
const secretFile = "var/secret"

// loadSecret returns the deployment secret: LECTERN_SECRET, or the one in
// var/secret, created on first start.
func loadSecret(configured string) ([]byte, error) {
	if configured != "" {
		if len(configured) < 32 {
			return nil, errors.New("LECTERN_SECRET must be at least 32 characters")
		}
		return []byte(configured), nil
	}
	b, err := os.ReadFile(secretFile)
	if err == nil && len(strings.TrimSpace(string(b))) >= 32 {
		return []byte(strings.TrimSpace(string(b))), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", secretFile, err)
	}
	var r [32]byte
	rand.Read(r[:])
	s := hex.EncodeToString(r[:])
	if err := os.MkdirAll(filepath.Dir(secretFile), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(secretFile, []byte(s+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("write %s: %w", secretFile, err)
	}
	return []byte(s), nil
}

// subkey derives an independent key for one purpose from the secret.
func subkey(secret []byte, purpose string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("lectern/" + purpose))
	return m.Sum(nil)
}
