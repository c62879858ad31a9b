package contract

import (
	"fmt"
	"time"
)

// Bounds on a policy's penalty.
const (
	// MaxPenaltyDenials bounds how many denials a penalty counts.
	MaxPenaltyDenials = 1_000_000
	// MinPenaltyWithin and MaxPenaltyWithin bound the window they are
	// counted in.
	MinPenaltyWithin = time.Millisecond
	MaxPenaltyWithin = 24 * time.Hour
	// MaxPenaltyCounters bounds the keys whose denials the cluster counts
	// at once, for every penalty together; past it, a key denied for the
	// first time is not counted until others' windows end.
	MaxPenaltyCounters = 100_000
	// MaxPenaltyCountersPerCaller bounds the counts one caller (an API
	// token) opens, by the first denial of a key in a window, so that one
	// caller cannot fill the cluster's and let the others' abusers escape
	// their penalties. Without tokens every caller is one.
	MaxPenaltyCountersPerCaller = MaxPenaltyCounters / 4
)

// Penalty blocks a key of a policy that is denied often: Denials denials
// within Within of the first of them, and the key is blocked for BlockFor
// (see BlockRequest). Denials are counted in the replicated state, in the
// order of the log, from the cluster time of each entry, so every node
// blocks the key at the same entry; a denial because the key is blocked
// already does not count.
type Penalty struct {
	Denials  int64
	Within   time.Duration
	BlockFor time.Duration
}

// Validate checks a penalty; fields are named under "penalty".
func (p *Penalty) Validate() *Error {
	if p == nil {
		return nil
	}
	switch {
	case p.Denials < 1 || p.Denials > MaxPenaltyDenials:
		return Invalid("penalty.denials", "denials must be an integer from 1 to %d", MaxPenaltyDenials)
	case p.Within < MinPenaltyWithin || p.Within > MaxPenaltyWithin:
		return Invalid("penalty.within", "within must be a Go duration from %s to %s", MinPenaltyWithin, MaxPenaltyWithin)
	case p.BlockFor < MinBlockTTL || p.BlockFor > MaxBlockTTL:
		return Invalid("penalty.block_for", "block_for must be a Go duration from %s to %s", MinBlockTTL, MaxBlockTTL)
	}
	return nil
}

// PenaltyOf reads a penalty as the HTTP API and the rate limit service's
// YAML spell it: a number of denials and two Go durations, each required.
func PenaltyOf(denials int64, within, blockFor string) (*Penalty, *Error) {
	p := &Penalty{Denials: denials}
	for _, d := range []struct {
		field, text string
		into        *time.Duration
	}{{"penalty.within", within, &p.Within}, {"penalty.block_for", blockFor, &p.BlockFor}} {
		v, err := time.ParseDuration(d.text)
		if err != nil {
			return nil, Invalid(d.field, "%s is required: a Go duration such as \"1m\", not %q", d.field[len("penalty."):], d.text)
		}
		*d.into = v
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// Reason is what the block a penalty imposes says: why the key is blocked.
func (p *Penalty) Reason() string {
	return fmt.Sprintf("%d denials within %s", p.Denials, p.Within)
}
