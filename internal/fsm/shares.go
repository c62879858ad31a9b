package fsm

import (
	"cmp"
	"container/heap"
	"slices"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
)

// Local shares in the log: a request of one check may ask, besides its own
// cost, for a share of the check's budget (Request.Share), which the FSM
// grants from what the key has left and charges in the key's state
// (algorithms.Grant); CommandReturnShare gives back what a holder did not
// spend. The ledger lists the outstanding shares in the whole state, for
// the bound on them and for statistics.

// ShareAsk asks for a share of a request's one check: up to Units, for
// TTLNanos of cluster time.
type ShareAsk struct {
	Units    int64
	TTLNanos int64
}

// validate checks an ask as it stands, and what it rides on.
func (a *ShareAsk) validate(r *Request) *contract.Error {
	switch {
	case len(r.Checks) != 1 || r.RLS != nil:
		return contract.Invalid("checks", "a share is asked for with exactly one check")
	case r.RequestID != "" || r.MaxWait != 0:
		return contract.Invalid("request_id", "a share is not asked for with a request ID or max_wait")
	case a.Units < 1 || a.Units > algorithms.MaxBurst:
		return contract.Invalid("share.units", "a share is 1 to %d units", int64(algorithms.MaxBurst))
	case a.TTLNanos < int64(contract.MinShareTTL) || a.TTLNanos > int64(contract.MaxShareTTL):
		return contract.Invalid("share.ttl", "a share lasts from %s to %s", contract.MinShareTTL, contract.MaxShareTTL)
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
// res: the key's limit must allow shares (an inline check asks for itself;
// a policy needs local_shares), and the share is at most what was asked,
// the policy's MaxUnits and half of what the key has left.
func (f *FSM) grantShare(now int64, req *Request, res *Result, position int, cmd *AllowCommand) {
	if !res.Allowed || res.Duplicate || res.Rejection != nil || position >= 1<<shareIDBits || f.shares.len() >= contract.MaxShares {
		return
	}
	t, err := f.resolve(now, &req.Checks[0])
	if err != nil || t.shadow || t.deferred {
		return
	}
	ttl, most := req.Share.TTLNanos, t.limit.Capacity()
	if t.policy != nil {
		ls := t.policy.policy.LocalShares
		if ls == nil {
			return
		}
		ttl, most = min(ttl, ls.TTL()), ls.MaxUnitsOf(*t.limit)
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
	sh, next, ok := algorithms.Grant(*t.limit, t.state, now, units, ttl, id)
	if !ok {
		return
	}
	if t.live {
		f.buckets.update(t.slot, t.id, *t.limit, next)
	} else {
		f.buckets.create(t.id, *t.limit, next)
	}
	f.shares.add(ledgerEntry{Share: sh, policy: t.id.policy})
	res.Share = &GrantedShare{ID: id, Units: units, UntilNanos: sh.Until, Remaining: left - units}
}

// ReturnShareCommand is the body of CommandReturnShare: a holder gives back
// Unspent units of share ShareID of Check's key, at the leader's time.
type ReturnShareCommand struct {
	NowNanos int64
	Check    Check
	ShareID  uint64
	Unspent  int64
}

// Validate checks a return as it stands.
func (c *ReturnShareCommand) Validate() *contract.Error {
	check := c.Check.contract()
	if err := check.Validate(); err != nil {
		return err.Within("check")
	}
	if c.Unspent < 0 {
		return contract.Invalid("unspent", "unspent must not be negative")
	}
	return nil
}

// ShareReturn answers CommandReturnShare: the units given back (0 when the
// share had ended or is unknown).
type ShareReturn struct {
	Units int64
}

func (f *FSM) returnShare(cmd *ReturnShareCommand) *ShareReturn {
	now := f.advance(cmd.NowNanos)
	t, err := f.resolve(now, &cmd.Check)
	if err != nil || !t.live {
		return &ShareReturn{}
	}
	next, units := algorithms.GiveBack(*t.limit, t.state, now, cmd.ShareID, cmd.Unspent)
	if units > 0 {
		f.buckets.update(t.slot, t.id, *t.limit, next)
		f.shares.remove(cmd.ShareID)
	}
	return &ShareReturn{Units: units}
}

// publishSharing publishes which policies have local shares, as applied.
// Called with f.mu held, after each policy change and restore.
func (f *FSM) publishSharing() {
	m := map[string]*contract.LocalShares{}
	for name, e := range f.policies {
		if ls := e.policy.LocalShares; ls != nil {
			copied := *ls
			m[name] = &copied
		}
	}
	f.sharing.Store(&m)
}

// LocalSharesOf returns the local_shares of the named policy as this
// replica last applied it, nil when it has none. It takes no lock: the
// node reads it for every request.
func (f *FSM) LocalSharesOf(policy string) *contract.LocalShares {
	if m := f.sharing.Load(); m != nil {
		return (*m)[policy]
	}
	return nil
}

// ledgerEntry is one outstanding share and the policy of its key ("" for
// an inline limit).
type ledgerEntry struct {
	algorithms.Share
	policy string
}

// shareLedger lists the outstanding shares by end (then ID), so that which
// ones an apply drops depends on the state alone.
type shareLedger struct {
	byEnd []ledgerEntry // a heap
	ids   map[uint64]bool
}

func newShareLedger() *shareLedger { return &shareLedger{ids: map[uint64]bool{}} }

func (l *shareLedger) len() int { return len(l.byEnd) }

func (l *shareLedger) add(e ledgerEntry) {
	if l.ids[e.ID] {
		return
	}
	l.ids[e.ID] = true
	heap.Push((*ledgerHeap)(l), e)
}

func (l *shareLedger) remove(id uint64) {
	if !l.ids[id] {
		return
	}
	delete(l.ids, id)
	i := slices.IndexFunc(l.byEnd, func(e ledgerEntry) bool { return e.ID == id })
	heap.Remove((*ledgerHeap)(l), i)
}

// expire drops the shares that ended by now.
func (l *shareLedger) expire(now int64) {
	for len(l.byEnd) > 0 && l.byEnd[0].Until <= now {
		delete(l.ids, heap.Pop((*ledgerHeap)(l)).(ledgerEntry).ID)
	}
}

// counts returns the outstanding shares per policy, by policy.
func (l *shareLedger) counts() []contract.ShareCount {
	by := map[string]*contract.ShareCount{}
	for _, e := range l.byEnd {
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

type ledgerHeap shareLedger

func (h *ledgerHeap) Len() int { return len(h.byEnd) }
func (h *ledgerHeap) Less(i, j int) bool {
	return cmp.Or(cmp.Compare(h.byEnd[i].Until, h.byEnd[j].Until), cmp.Compare(h.byEnd[i].ID, h.byEnd[j].ID)) < 0
}
func (h *ledgerHeap) Swap(i, j int) { h.byEnd[i], h.byEnd[j] = h.byEnd[j], h.byEnd[i] }
func (h *ledgerHeap) Push(x any)    { h.byEnd = append(h.byEnd, x.(ledgerEntry)) }
func (h *ledgerHeap) Pop() any {
	e := h.byEnd[len(h.byEnd)-1]
	h.byEnd = h.byEnd[:len(h.byEnd)-1]
	return e
}
