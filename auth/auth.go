package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Role is a permission a token may hold.
type Role string

// The roles.
const (
	// RoleDecide: POST /v1/allow and /v1/allow/batch, leases and
	// /v1/forward-auth.
	RoleDecide Role = "decide"
	// RoleRead: every other GET under /v1/, and /metrics.
	RoleRead Role = "read"
	// RoleAdmin: everything, including policy and configuration writes,
	// membership and snapshots. It implies RoleDecide and RoleRead.
	RoleAdmin Role = "admin"
)

// Errors of Authorize. None says anything of the token presented but
// whether there was one.
var (
	// ErrUnauthenticated: no token, or one the file does not list. Each
	// of ErrNoToken and ErrUnknownToken is one (errors.Is).
	ErrUnauthenticated = errors.New("a valid bearer token is required")
	// ErrNoToken: the call carries no token.
	ErrNoToken = fmt.Errorf("%w: the call carries none", ErrUnauthenticated)
	// ErrUnknownToken: the call carries a token that matches none of
	// the file's.
	ErrUnknownToken = fmt.Errorf("%w: the token given matches none of the cluster's", ErrUnauthenticated)
	// ErrPermissionDenied: a known token without the role the call needs.
	ErrPermissionDenied = errors.New("the token lacks the role this call needs")
)

// Authorizer says whether a bearer token may make a call that needs role,
// returning the token's name: ErrNoToken, ErrUnknownToken or
// ErrPermissionDenied when it may not. *File and *Tokens implement it.
type Authorizer interface {
	Authorize(token string, role Role) (name string, err error)
}

// MaxFileBytes bounds a token file.
const MaxFileBytes = 1 << 20

// entry is one token of the file.
type entry struct {
	name  string
	hash  [sha256.Size]byte
	roles map[Role]bool
}

// Tokens is a parsed token file.
type Tokens struct{ entries []entry }

type fileJSON struct {
	Tokens []struct {
		Name   string `json:"name"`
		SHA256 string `json:"sha256"`
		Roles  []Role `json:"roles"`
	} `json:"tokens"`
}

// Parse reads a token file. Every entry needs a name, a SHA-256 of 64 hex
// digits and at least one known role; the error names the entry at fault
// (by position and name, never by hash).
func Parse(r io.Reader) (*Tokens, error) {
	dec := json.NewDecoder(io.LimitReader(r, MaxFileBytes+1))
	dec.DisallowUnknownFields()
	var f fileJSON
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a token file of the form {\"tokens\": [...]}: %w", err)
	}
	if dec.More() {
		return nil, errors.New("data after the JSON object")
	}
	out := &Tokens{}
	for i, t := range f.Tokens {
		at := fmt.Sprintf("tokens[%d] (%q)", i, t.Name)
		if t.Name == "" {
			return nil, fmt.Errorf("%s: a name is required", at)
		}
		raw, err := hex.DecodeString(t.SHA256)
		if err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("%s: sha256 must be 64 hex digits (the SHA-256 of the token, not the token)", at)
		}
		e := entry{name: t.Name, roles: map[Role]bool{}}
		copy(e.hash[:], raw)
		if len(t.Roles) == 0 {
			return nil, fmt.Errorf("%s: at least one role is required", at)
		}
		for _, role := range t.Roles {
			switch role {
			case RoleDecide, RoleRead, RoleAdmin:
				e.roles[role] = true
			default:
				return nil, fmt.Errorf("%s: unknown role %q; roles are decide, read and admin", at, role)
			}
		}
		out.entries = append(out.entries, e)
	}
	return out, nil
}

// Authorize says whether token may make a call that needs role, and if so
// returns the token's name (for logs). The token is hashed and compared
// with every entry, each in constant time.
func (t *Tokens) Authorize(token string, role Role) (string, error) {
	if token == "" {
		return "", ErrNoToken
	}
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range t.entries {
		if subtle.ConstantTimeCompare(sum[:], t.entries[i].hash[:]) == 1 && found < 0 {
			found = i
		}
	}
	if found < 0 {
		return "", ErrUnknownToken
	}
	e := &t.entries[found]
	if e.roles[RoleAdmin] || e.roles[role] {
		return e.name, nil
	}
	return e.name, ErrPermissionDenied
}

// File is a token file on disk, re-read when it changes (looked at no more
// than once a second).
type File struct {
	path    string
	onError func(error)

	mu        sync.Mutex
	tokens    *Tokens
	stamp     fileStamp
	checkedAt time.Time
}

type fileStamp struct {
	modTime time.Time
	size    int64
}

// checkEvery is how often, at most, the file is looked at again.
var checkEvery = time.Second

// OpenFile reads a token file. onError, if not nil, is told of a later
// version that was refused (the last good one stays in force).
func OpenFile(path string, onError func(error)) (*File, error) {
	if onError == nil {
		onError = func(error) {}
	}
	f := &File{path: path, onError: onError}
	tokens, stamp, err := f.read()
	if err != nil {
		return nil, err
	}
	f.tokens, f.stamp, f.checkedAt = tokens, stamp, time.Now()
	return f, nil
}

func (f *File) read() (*Tokens, fileStamp, error) {
	file, err := os.Open(f.path)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("token file: %w", err)
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("token file %s: %w", f.path, err)
	}
	tokens, err := Parse(file)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("token file %s: %w", f.path, err)
	}
	return tokens, fileStamp{fi.ModTime(), fi.Size()}, nil
}

// Authorize is Tokens.Authorize on the file's current tokens.
func (f *File) Authorize(token string, role Role) (string, error) {
	return f.current().Authorize(token, role)
}

func (f *File) current() *Tokens {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.checkedAt) < checkEvery {
		return f.tokens
	}
	f.checkedAt = time.Now()
	fi, err := os.Stat(f.path)
	if err != nil {
		f.onError(fmt.Errorf("token file: %w; keeping the last good version", err))
		return f.tokens
	}
	if fi.ModTime().Equal(f.stamp.modTime) && fi.Size() == f.stamp.size {
		return f.tokens
	}
	tokens, stamp, err := f.read()
	if err != nil {
		f.onError(fmt.Errorf("%w; keeping the last good version", err))
		return f.tokens
	}
	f.tokens, f.stamp = tokens, stamp
	return f.tokens
}

// NewToken returns a new random token (32 bytes from crypto/rand, base64url)
// and its SHA-256 as the token file wants it.
func NewToken() (token, sha256Hex string) {
	var raw [32]byte
	_, _ = rand.Read(raw[:]) // crypto/rand does not fail
	token = "ln_" + base64.RawURLEncoding.EncodeToString(raw[:])
	sum := sha256.Sum256([]byte(token))
	return token, hex.EncodeToString(sum[:])
}

// BearerToken returns the token of an Authorization header value
// "Bearer <token>", or "".
func BearerToken(header string) string {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}
