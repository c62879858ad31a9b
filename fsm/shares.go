package fsm

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"fmt"
	"slices"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/rls"
)

// Local shares in the log: a request of one check may ask, besides its own
// cost, for a share of the check's budget (Request.Share), which the FSM
// grants from what the key has left and charges in the key's state
// (algorithms.Grant); CommandReturnShare gives back what a holder did not
// spend. The ledger lists the outstanding shares in the whole state, for
// the bound on them and for statistics, and whose each one is.
//
// Giving back is a claim about what someone else did not spend, so only
// the holder may make it: every ask names its holder (a caller's scope, or
// a node) and carries the proof of a secret only the holder knows
// (ShareProof); a return must name the same holder and prove the same
// secret. The secret itself never enters the log.

// ShareProofBytes is the length of a share's proof.
const ShareProofBytes = 16

// ShareProof is the proof of a share's secret that the log keeps: the
// first ShareProofBytes of its SHA-256.
func ShareProof(secret []byte) []byte {
	sum := sha256.Sum256(secret)
	return sum[:ShareProofBytes]
}

// ShareAsk asks for a share of a request's one check: up to Units, for
// TTLNanos of cluster time, held by Holder, who proves it holds the share
// with the secret whose ShareProof is Proof.
type ShareAsk struct {
	Units    int64
	TTLNanos int64
	// Holder and Proof come last: an ask written before them grants a
	// share no one can give back.
	Holder string
	Proof  []byte
	// Secret is the secret itself, for the node that asks to tell the
	// holder; it is never encoded, so neither the log nor the leader
	// sees it.
	Secret []byte `codec:"-"`
}

// NewShareAsk asks for units for ttl on behalf of holder, with a fresh
// secret.
func NewShareAsk(units, ttl int64, holder string) *ShareAsk {
	secret := contract.NewShareSecret()
	return &ShareAsk{Units: units, TTLNanos: ttl, Holder: holder, Proof: ShareProof(secret), Secret: secret}
}

// validate checks an ask as it stands, and what it rides on.
func (a *ShareAsk) validate(r *Request) *contract.Error {
	switch {
	case r.RLS != nil && !oneDescriptor(r.RLS):
		return contract.Invalid("descriptors", "a share is asked for with exactly one descriptor, without a limit override")
	case r.RLS == nil && len(r.Checks) != 1:
		return contract.Invalid("checks", "a share is asked for with exactly one check")
	case r.RequestID != "" || r.MaxWait != 0:
		return contract.Invalid("request_id", "a share is not asked for with a request ID or max_wait")
	case a.Units < 1 || a.Units > algorithms.MaxBurst:
		return contract.Invalid("share.units", "a share is 1 to %d units", int64(algorithms.MaxBurst))
	case a.TTLNanos < int64(contract.MinShareTTL) || a.TTLNanos > int64(contract.MaxShareTTL):
		return contract.Invalid("share.ttl", "a share lasts from %s to %s", contract.MinShareTTL, contract.MaxShareTTL)
	}
	return validateHolder(a.Holder, a.Proof)
}

// MaxHolderBytes bounds the name of a share's holder: a caller's scope, or
// a node's ID with its prefix (NodeHolder).
const MaxHolderBytes = contract.MaxScopeBytes + len(nodeHolderPrefix) + contract.MaxNodeIDBytes

// nodeHolderPrefix starts the holder name of a node's own shares; a
// caller's scope holds no NUL, so no caller can name a node.
const nodeHolderPrefix = "\x00node:"

// NodeHolder is the holder name of the shares node id holds itself.
func NodeHolder(id string) string { return nodeHolderPrefix + id }

// validateHolder checks a share's holder and proof as an ask or a return
// carries them (no proof: an ask logged before proofs were).
func validateHolder(holder string, proof []byte) *contract.Error {
	if len(holder) > MaxHolderBytes {
		return contract.Invalid("share.holder", "a share's holder is at most %d bytes", MaxHolderBytes)
	}
	if len(proof) != 0 && len(proof) != ShareProofBytes {
		return contract.Invalid("share.proof", "a share's proof is %d bytes", ShareProofBytes)
	}
	return nil
}

// GrantedShare is a share the log granted: ID among the key's shares,
// Units to spend until UntilNanos of cluster time, and Remaining, what the
// key had left for everyone else once the share was taken.
type GrantedShare struct {
	ID         uint64
	Units      int64
	UntilNanos int64
	Remaining  int64
}

// shareIDBits is how many low bits of a share's ID number the request in
// its entry; the rest is the entry's index, so IDs never repeat.
const shareIDBits = 24

// grantShare grants what req's share ask may have, once req was decided as
// res: the limit must allow shares (an inline check asks for itself; a
// policy, or the rate_limit an RLS descriptor matched, needs local_shares
// as this entry's state has them), no restore may be staged, and the share
// is at most what was asked, the local_shares' max_units and half of what
// the key has left.
func (f *FSM) grantShare(now int64, req *Request, res *Result, position int, cmd *AllowCommand) {
	if !res.Allowed || res.Duplicate || res.Rejection != nil || position >= 1<<shareIDBits || f.shares.len() >= contract.MaxShares {
		return
	}
	if f.staged != nil {
		// A restore is being staged: its commit replaces the buckets, so
		// no share is granted that a holder could spend past it (the
		// leader commits once the shares granted before have ended).
		return
	}
	t, ok := f.shareTarget(now, req.Checks, req.RLS)
	if !ok || t.shadow || t.deferred {
		return
	}
	ttl, most := req.Share.TTLNanos, t.limit.Capacity()
	if t.id.policy != "" { // a policy's key or a domain's counter: only with the configuration's consent
		if t.shares == nil {
			return
		}
		ttl, most = min(ttl, int64(t.shares.TTLOrDefault())), t.shares.MaxUnitsOf(*t.limit)
	}
	if !t.live && cmd.MaxKeys > 0 && int64(f.buckets.len()) >= cmd.MaxKeys {
		return
	}
	left := res.Checks[0].Decision.Remaining
	units := min(req.Share.Units, most, left-left/2)
	if units < 1 {
		return
	}
	id := f.lastIndex<<shareIDBits | uint64(position)
	sh, next, ok := algorithms.Grant(*t.limit, t.state, now, units, time.Duration(ttl), id)
	if !ok {
		return
	}
	if t.live {
		f.buckets.update(t.slot, t.id, *t.limit, next)
	} else {
		f.buckets.create(t.id, *t.limit, next)
	}
	f.shares.add(ledgerEntry{Share: sh, policy: t.id.policy, holder: req.Share.Holder, proof: req.Share.Proof})
	res.Share = &GrantedShare{ID: id, Units: units, UntilNanos: sh.Until, Remaining: left - units}
}

// shareTarget is what a share of checks' one check, or of q's one
// descriptor (q not nil), is a share of, resolved at now: the check's
// bucket, or the counter of the one limit the descriptor matched. ok is
// false when there is none: the check does not resolve, or the descriptor
// matches no limit, or one that refuses every hit.
func (f *FSM) shareTarget(now int64, checks []Check, q *rls.Query) (t target, ok bool) {
	if q != nil {
		targets, statuses, err := f.rlsTargets(now, q, nil)
		if err != nil || len(targets) != 1 || len(statuses) != 1 || !statuses[0].Limited || targets[0].never {
			return target{}, false
		}
		return targets[0], true
	}
	if len(checks) != 1 {
		return target{}, false
	}
	t, err := f.resolve(now, &checks[0])
	return t, err == nil
}

// oneDescriptor reports whether q is a query a share may be of: one
// descriptor, under the configuration's limit (no override).
func oneDescriptor(q *rls.Query) bool {
	return len(q.Descriptors) == 1 && q.Descriptors[0].Override == nil
}

// ReturnShareCommand is the body of CommandReturnShare: Holder gives back
// Unspent units of share ShareID of Check's key, at the leader's time,
// proving it holds the share with Proof (the ShareProof of the share's
// secret).
type ReturnShareCommand struct {
	NowNanos int64
	Check    Check
	ShareID  uint64
	Unspent  int64
	// Holder and Proof come last: a return written before them gives
	// nothing back.
	Holder string
	Proof  []byte
	// Background, last, marks a return no caller waits for: the leader
	// answers it once applied instead of waiting out the deny leases (see
	// Effect).
	Background bool
	// RLS, when set, names the key as the query of one descriptor whose
	// share it is (its hits are not used), instead of Check. Last, as
	// Background.
	RLS *rls.Query
}

// Validate checks a return as it stands.
func (c *ReturnShareCommand) Validate() *contract.Error {
	if c.RLS != nil {
		if err := c.RLS.Validate(); err != nil {
			return err.Within("rls")
		}
		if !oneDescriptor(c.RLS) {
			return contract.Invalid("rls.descriptors", "a share is of exactly one descriptor, without a limit override")
		}
	} else {
		check := c.Check.contract()
		if err := check.Validate(); err != nil {
			return err.Within("check")
		}
	}
	if c.Unspent < 0 {
		return contract.Invalid("unspent", "unspent must not be negative")
	}
	return validateHolder(c.Holder, c.Proof)
}

// ShareReturn answers CommandReturnShare: the units given back (0 when the
// share had ended, was given back already or is unknown), and the key they
// went back to (an empty key when none did).
type ShareReturn struct {
	Units int64
	// Key is the key the units went back to, for the nodes to drop the
	// deny leases it may contradict, and Background the command's. The
	// log never holds them.
	Key        string `codec:"-"`
	Background bool   `codec:"-"`
}

// returnShare applies a return: a share that ended, was given back or
// never was gives back nothing; one held by another holder, or proved with
// another secret, refuses the return, as does one that claims more unspent
// than the share holds. The answer is a *ShareReturn or a *contract.Error.
func (f *FSM) returnShare(cmd *ReturnShareCommand) any {
	now := f.advance(cmd.NowNanos)
	t, ok := f.shareTarget(now, []Check{cmd.Check}, cmd.RLS)
	if !ok || !t.live {
		return &ShareReturn{}
	}
	f.shares.expire(now)
	e := f.shares.byID[cmd.ShareID]
	switch {
	case e == nil:
		return &ShareReturn{}
	case len(cmd.Proof) == 0 || e.holder != cmd.Holder || !bytes.Equal(e.proof, cmd.Proof):
		return contract.Denied("id", "share %d is not held by this caller, or its secret is wrong: only the holder that took a share gives it back, with the id the grant gave", cmd.ShareID)
	case cmd.Unspent > e.Units:
		return contract.Invalid("unspent", "share %d holds %d units; unspent must be at most that", cmd.ShareID, e.Units)
	}
	next, units := algorithms.GiveBack(*t.limit, t.state, now, cmd.ShareID, cmd.Unspent)
	if units == 0 {
		return &ShareReturn{}
	}
	f.buckets.update(t.slot, t.id, *t.limit, next)
	f.shares.remove(cmd.ShareID)
	return &ShareReturn{Units: units, Key: t.id.key, Background: cmd.Background}
}

// sharingView is what the node's hot path reads of the applied state to
// know which requests may be answered from shares, without the lock: the
// policies with local shares, and the domains with a rate_limit that has
// them.
type sharingView struct {
	policies map[string]*contract.LocalShares
	domains  map[string]*rls.Domain
}

// publishSharing publishes which policies and domains have local shares,
// as applied. Called with f.mu held, after each policy or domain change
// and restore.
func (f *FSM) publishSharing() {
	v := &sharingView{policies: map[string]*contract.LocalShares{}, domains: map[string]*rls.Domain{}}
	for name, e := range f.policies {
		if ls := e.policy.LocalShares; ls != nil {
			copied := *ls
			v.policies[name] = &copied
		}
	}
	for name, d := range f.rlsDomains {
		if d.HasShares() {
			v.domains[name] = d // immutable
		}
	}
	f.sharing.Store(v)
}

// LocalSharesOf returns the local_shares of the named policy as this
// replica last applied it, nil when it has none. It takes no lock: the
// node reads it for every request.
func (f *FSM) LocalSharesOf(policy string) *contract.LocalShares {
	if v := f.sharing.Load(); v != nil {
		return v.policies[policy]
	}
	return nil
}

// RLSSharesOf returns the local_shares of the rate_limit that q's one
// descriptor matches in its domain as this replica last applied it, and
// that rate_limit's limit; nil when a share of q may not be asked for: q
// has several descriptors or an override, or the limit it matches has no
// local_shares or is in shadow mode. It takes no lock, as LocalSharesOf.
func (f *FSM) RLSSharesOf(q *rls.Query) (*contract.LocalShares, algorithms.Limit) {
	v := f.sharing.Load()
	if v == nil || !oneDescriptor(q) {
		return nil, algorithms.Limit{}
	}
	d := v.domains[q.Domain]
	if d == nil {
		return nil, algorithms.Limit{}
	}
	m := d.Match(q.Descriptors[0].Entries)
	if m.Shares == nil || !m.Limited || m.Shadow {
		return nil, algorithms.Limit{}
	}
	return m.Shares, m.Limit
}

// ledgerEntry is one outstanding share, the policy of its key ("" for an
// inline limit), and its holder and proof (see ShareAsk).
type ledgerEntry struct {
	algorithms.Share
	policy string
	holder string
	proof  []byte
	index  int // in the ledger's heap
}

// shareLedger lists the outstanding shares by end (then ID), so that which
// ones an apply drops depends on the state alone, and by ID.
type shareLedger struct {
	byEnd *orderedHeap[ledgerEntry]
	byID  map[uint64]*ledgerEntry
}

func newShareLedger() *shareLedger {
	return &shareLedger{byID: map[uint64]*ledgerEntry{}, byEnd: newOrderedHeap(func(a, b *ledgerEntry) int {
		return cmp.Or(cmp.Compare(a.Until, b.Until), cmp.Compare(a.ID, b.ID))
	}, func(e *ledgerEntry) *int { return &e.index })}
}

func (l *shareLedger) len() int { return l.byEnd.len() }

func (l *shareLedger) add(e ledgerEntry) {
	if l.byID[e.ID] != nil {
		return
	}
	l.byID[e.ID] = &e
	l.byEnd.add(&e)
}

func (l *shareLedger) remove(id uint64) {
	e := l.byID[id]
	if e == nil {
		return
	}
	delete(l.byID, id)
	l.byEnd.remove(e)
}

// expire drops the shares that ended by now.
func (l *shareLedger) expire(now int64) {
	for e := l.byEnd.first(); e != nil && e.Until <= now; e = l.byEnd.first() {
		l.byEnd.remove(e)
		delete(l.byID, e.ID)
	}
}

// holders returns the holder and proof of every outstanding share that has
// them, by ID: what a snapshot keeps of the ledger beyond the buckets.
func (l *shareLedger) holders() []shareHolderRecord {
	var out []shareHolderRecord
	for _, e := range l.byEnd.all() {
		if e.holder != "" || len(e.proof) > 0 {
			out = append(out, shareHolderRecord{ID: e.ID, Holder: e.holder, Proof: e.proof})
		}
	}
	slices.SortFunc(out, func(a, b shareHolderRecord) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// shareHolderRecord is the holder and proof of one outstanding share, as a
// snapshot keeps them.
type shareHolderRecord struct {
	ID     uint64
	Holder string
	Proof  []byte
}

// restoreShareHolder gives a restored share its holder and proof.
func (f *FSM) restoreShareHolder(rec *shareHolderRecord) error {
	if err := validateHolder(rec.Holder, rec.Proof); err != nil {
		return err
	}
	e := f.shares.byID[rec.ID]
	if e == nil {
		return fmt.Errorf("the holder of share %d, which no bucket holds", rec.ID)
	}
	e.holder, e.proof = rec.Holder, rec.Proof
	return nil
}

// counts returns the outstanding shares per policy, by policy.
func (l *shareLedger) counts() []contract.ShareCount {
	by := map[string]*contract.ShareCount{}
	for _, e := range l.byEnd.all() {
		c := by[e.policy]
		if c == nil {
			c = &contract.ShareCount{Policy: e.policy}
			by[e.policy] = c
		}
		c.Shares++
		c.Units += e.Units
	}
	out := make([]contract.ShareCount, 0, len(by))
	for _, c := range by {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b contract.ShareCount) int { return cmp.Compare(a.Policy, b.Policy) })
	return out
}

// OutstandingShares returns the shares outstanding at the latest applied
// time, per policy.
func (f *FSM) OutstandingShares() []contract.ShareCount {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.shares.counts()
}
