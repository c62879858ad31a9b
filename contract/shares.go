package contract

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/limitnode/limitnode/algorithms"
)

// Bounds on local shares.
const (
	// DefaultShareTTL is how long a share lasts when LocalShares gives no
	// TTL.
	DefaultShareTTL = 500 * time.Millisecond
	// MinShareTTL and MaxShareTTL bound a share's TTL. The maximum is also
	// how long a command that changes a policy may wait before it is
	// acknowledged: until every share granted under the old one has ended.
	MinShareTTL = 10 * time.Millisecond
	MaxShareTTL = time.Second
	// MaxShares bounds the shares outstanding in the whole cluster; beyond
	// it, requests are decided through the log as without shares.
	MaxShares = 65_536
)

// LocalShares lets every node decide a policy's keys, or an inline limit's,
// from shares of their budget: a node that sees a key often takes part of
// its budget through the log in one entry and admits from it on its own
// until the share ends (see algorithms.Grant for how a share is charged so
// that the sum admitted never exceeds the limit). The zero value means the
// defaults.
type LocalShares struct {
	// TTL is how long a share may be spent: 0 means DefaultShareTTL,
	// else from MinShareTTL to MaxShareTTL. (A window algorithm's share
	// ends with its window at the latest.)
	TTL time.Duration
	// MaxUnits bounds one share, in units of cost: 0 means an eighth of
	// the limit's capacity (at least 1), else from 1 to the capacity. A
	// node asks for what it spent in its last share's lifetime, doubled,
	// up to this; the cluster grants at most half of what the key has left.
	MaxUnits int64
}

// Validate checks the shares' settings against the limit they share.
func (s *LocalShares) Validate(l algorithms.Limit) *Error {
	if s == nil {
		return nil
	}
	if s.TTL != 0 && (s.TTL < MinShareTTL || s.TTL > MaxShareTTL) {
		return Invalid("local_shares.ttl", "ttl must be from %s to %s", MinShareTTL, MaxShareTTL)
	}
	if s.MaxUnits < 0 || s.MaxUnits > l.Capacity() {
		return Invalid("local_shares.max_units", "max_units must be from 1 to the limit's capacity (%d), or 0 for an eighth of it", l.Capacity())
	}
	return nil
}

// TTLOrDefault is the shares' TTL, DefaultShareTTL when not given.
func (s *LocalShares) TTLOrDefault() time.Duration {
	if s.TTL == 0 {
		return DefaultShareTTL
	}
	return s.TTL
}

// MaxUnitsOf is the most one share of l holds, the default filled in.
func (s *LocalShares) MaxUnitsOf(l algorithms.Limit) int64 {
	if s.MaxUnits > 0 {
		return min(s.MaxUnits, l.Capacity())
	}
	return max(l.Capacity()/8, 1)
}

// SharesSpec is LocalShares as callers spell it: a TTL as a Go duration
// and a most units per share; a nil field was not given.
type SharesSpec struct {
	TTL      *string
	MaxUnits *int64
}

// LocalShares turns the spec into LocalShares for limit l and validates
// it. Fields are named under "local_shares".
func (s SharesSpec) LocalShares(l algorithms.Limit) (*LocalShares, *Error) {
	out := &LocalShares{}
	if s.TTL != nil {
		d, err := time.ParseDuration(*s.TTL)
		if err != nil {
			return nil, Invalid("local_shares.ttl", "ttl must be a Go duration such as 500ms")
		}
		out.TTL = d
		if d == 0 {
			return nil, Invalid("local_shares.ttl", "ttl must be from %s to %s", MinShareTTL, MaxShareTTL)
		}
	}
	if s.MaxUnits != nil {
		if *s.MaxUnits == 0 {
			return nil, Invalid("local_shares.max_units", "max_units must be from 1 to the limit's capacity (%d)", l.Capacity())
		}
		out.MaxUnits = *s.MaxUnits
	}
	if err := out.Validate(l); err != nil {
		return nil, err
	}
	return out, nil
}

// SpecOfShares spells s as callers do, the defaults left out; nil for
// nil.
func SpecOfShares(s *LocalShares) *SharesSpec {
	if s == nil {
		return nil
	}
	out := &SharesSpec{}
	if s.TTL != 0 {
		ttl := s.TTL.String()
		out.TTL = &ttl
	}
	if s.MaxUnits != 0 {
		out.MaxUnits = &s.MaxUnits
	}
	return out
}

// ShareRequest asks, with a request of one check, for a share of the
// check's budget for the caller to spend itself (the Go client's local
// shares): up to Units, lasting TTL (0: DefaultShareTTL). The check's
// policy must have local_shares; an inline limit's ask is its own consent.
type ShareRequest struct {
	Units int64
	TTL   time.Duration
}

// Validate checks the ask, and the request it rides on.
func (s *ShareRequest) Validate(r *Request) *Error {
	switch {
	case len(r.Checks) != 1:
		return Invalid("take_share", "a share is asked for with exactly one check")
	case r.RequestID != "" || r.MaxWait != 0:
		return Invalid("take_share", "a share is not asked for with a request_id or max_wait")
	case s.Units < 1 || s.Units > algorithms.MaxBurst:
		return Invalid("take_share.units", "units must be from 1 to %d", int64(algorithms.MaxBurst))
	case s.TTL != 0 && (s.TTL < MinShareTTL || s.TTL > MaxShareTTL):
		return Invalid("take_share.ttl", "ttl must be from %s to %s", MinShareTTL, MaxShareTTL)
	}
	return nil
}

// TTLOrDefault is the ask's TTL, DefaultShareTTL when not given.
func (s *ShareRequest) TTLOrDefault() time.Duration {
	if s.TTL == 0 {
		return DefaultShareTTL
	}
	return s.TTL
}

// GrantedShare is a share granted to a caller: Token names it, and proves
// the caller holds it, to give back what is left (ShareReturn); Units may
// be spent until SpendFor has passed since the caller sent its
// request, and Remaining is what the key had left for everyone else once
// it was taken.
type GrantedShare struct {
	Token     ShareToken
	Units     int64
	SpendFor  time.Duration
	Remaining int64
}

// ShareToken names a share to the cluster (ID) and proves its holder
// holds it (Secret, which only the holder is told; the cluster keeps a
// digest of it). It is written as the ID in decimal, a dot, and the secret
// in hex: the "id" of a share in the HTTP API.
type ShareToken struct {
	ID     uint64
	Secret []byte
}

// ShareSecretBytes is the length of a share's secret: 128 random bits.
const ShareSecretBytes = 16

// NewShareSecret returns a fresh random secret for a share.
func NewShareSecret() []byte {
	secret := make([]byte, ShareSecretBytes)
	_, _ = rand.Read(secret) // crypto/rand.Read never fails (Go 1.24)
	return secret
}

// String writes the token as the HTTP API does.
func (t ShareToken) String() string {
	return strconv.FormatUint(t.ID, 10) + "." + hex.EncodeToString(t.Secret)
}

// ParseShareToken reads a token written by ShareToken.String; field names
// it in an error.
func ParseShareToken(s, field string) (ShareToken, *Error) {
	id, secret, ok := strings.Cut(s, ".")
	n, err := strconv.ParseUint(id, 10, 64)
	b, herr := hex.DecodeString(secret)
	if !ok || err != nil || herr != nil || len(b) != ShareSecretBytes {
		return ShareToken{}, Invalid(field, "must be the share's id exactly as the allow answer gave it")
	}
	return ShareToken{ID: n, Secret: b}, nil
}

// ShareReturn gives back Unspent units of the share Token names, a share
// of Check's key (its cost is not used) held by Holder: the scope the
// share was asked with (contract.Request.Scope, the API token's name).
//
// A return is answered once every deny lease that could contradict it has
// ended (at most a second), so that after it no node answers a denial the
// units given back would admit; a Background return (a holder giving back
// a share it retired, which no caller waits for) is answered as soon as it
// is applied.
type ShareReturn struct {
	Check      Check
	Token      ShareToken
	Unspent    int64
	Holder     string
	Background bool
}

// Validate checks a return as it stands.
func (r *ShareReturn) Validate() *Error {
	check := r.Check
	check.Cost = 0
	if err := check.Validate(); err != nil {
		return err
	}
	if r.Unspent < 0 {
		return Invalid("unspent", "unspent must not be negative")
	}
	if len(r.Token.Secret) != ShareSecretBytes {
		return Invalid("id", "must be the share's id exactly as the allow answer gave it")
	}
	if len(r.Holder) > MaxScopeBytes || strings.IndexByte(r.Holder, 0) >= 0 {
		return Invalid("holder", "a share's holder is at most %d bytes, without NUL", MaxScopeBytes)
	}
	return nil
}
