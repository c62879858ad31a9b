package fsm

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
)

// Reservations to settle: a request with Settle is admitted for its whole
// cost, as any request, and its entry records what each check took
// (algorithms.Reservation) under an ID made of the entry's index and the
// request's place in it. CommandSettle then gives back, in one entry, what
// was not used (algorithms.Refund) or charges what was used beyond
// (algorithms.Charge, up to the policy's MaxDebt). A reservation not
// settled by its end stays charged in full: it is only forgotten. A
// settlement, or an ended reservation, is remembered for
// contract.SettledMemory: the same settlement again is answered with the
// first (a retry after an unknown outcome is charged once), another is
// refused, and either changes nothing. A key reset, or a change of the
// policy a check was reserved under (any put or delete after the
// reservation: the entry's version differs), forfeits the check's refund,
// since the state may no longer hold the units it took; a charge still
// applies, under the limit the key has now (none, if the policy is gone).

// SettleAsk asks that a request's admission be a reservation to settle
// within TTLNanos.
type SettleAsk struct {
	TTLNanos int64
}

// SettleCommand is the body of CommandSettle.
type SettleCommand struct {
	NowNanos int64
	ID       string
	Scope    string
	Cost     int64
}

// SettleResult answers CommandSettle.
type SettleResult struct {
	Settlement contract.Settlement
}

// settleTarget is one check of an open reservation: its bucket, the limit
// it was charged under, what it took, and the debt its policy allows.
type settleTarget struct {
	id          bucketKey
	limit       algorithms.Limit
	reservation algorithms.UpfrontCharge
	maxDebt     int64
	// version is the policy's (contract.PolicyStatus.Version) when the
	// reservation was made; 0 for an inline limit.
	version uint64
	forfeit bool // the key was reset: nothing to give back
}

// openSettlement is a reservation waiting for its settlement.
type openSettlement struct {
	id, scope string
	reserved  int64
	endNanos  int64
	targets   []settleTarget
	index     int // in the expiry heap
}

// settledRecord is a settlement, or an ended reservation, remembered.
type settledRecord struct {
	id, scope  string
	cost       int64
	ended      bool // the reservation ended unsettled
	result     contract.Settlement
	forgetAt   int64
	forgetting int // in the forget heap
}

// settleTable is the open reservations and the settled ones remembered.
type settleTable struct {
	open     map[string]*openSettlement
	byEnd    *orderedHeap[openSettlement]
	settled  map[string]*settledRecord
	byForget *orderedHeap[settledRecord]
	// openPerScope counts the open reservations of each caller.
	openPerScope perCaller
}

func newSettleTable() *settleTable {
	return &settleTable{open: make(map[string]*openSettlement), settled: make(map[string]*settledRecord), openPerScope: perCaller{},
		// Open reservations by (end, ID), remembered settlements by
		// (forget time, ID).
		byEnd: newOrderedHeap(func(a, b *openSettlement) int {
			return cmp.Or(cmp.Compare(a.endNanos, b.endNanos), strings.Compare(a.id, b.id))
		}, func(s *openSettlement) *int { return &s.index }),
		byForget: newOrderedHeap(func(a, b *settledRecord) int {
			return cmp.Or(cmp.Compare(a.forgetAt, b.forgetAt), strings.Compare(a.id, b.id))
		}, func(r *settledRecord) *int { return &r.forgetting }),
	}
}

// settlementID names the reservation of request position of the entry at
// index.
func settlementID(index uint64, position int) string {
	return "s" + strconv.FormatUint(index, 36) + "." + strconv.Itoa(position)
}

// full reports whether the table holds as many open reservations as it
// may.
func (t *settleTable) full() bool { return len(t.open) >= contract.MaxSettlements }

// refuseOpen returns the refusal of a new reservation of scope when the
// cluster, or the caller (a named one: contract.MaxSettlementsPerCaller),
// holds its most open reservations; nil when it fits.
func (t *settleTable) refuseOpen(scope string) *contract.Error {
	switch {
	case t.full():
		return contract.Exhausted("the cluster holds its maximum of %d open reservations; settle some, or wait for them to end", contract.MaxSettlements)
	case t.openPerScope.full(scope, contract.MaxSettlementsPerCaller):
		return contract.Exhausted("this caller holds %d open reservations, the most one caller may; settle some, or wait for them to end", contract.MaxSettlementsPerCaller)
	}
	return nil
}

// addOpen holds s open.
func (t *settleTable) addOpen(s *openSettlement) {
	t.open[s.id] = s
	t.byEnd.add(s)
	t.openPerScope.add(s.scope)
}

// removeOpen closes s, settled or ended.
func (t *settleTable) removeOpen(s *openSettlement) {
	t.byEnd.remove(s)
	delete(t.open, s.id)
	t.openPerScope.remove(s.scope)
}

// remember records a settled (or ended) reservation, forgetting the oldest
// remembered one when there are too many.
func (t *settleTable) remember(r *settledRecord) {
	if len(t.settled) >= contract.MaxSettlements {
		t.forget(t.byForget.first())
	}
	t.settled[r.id] = r
	t.byForget.add(r)
}

// end ends an open reservation unsettled: it stays charged in full, and
// is remembered as ended.
func (t *settleTable) end(s *openSettlement) {
	t.removeOpen(s)
	t.remember(&settledRecord{id: s.id, scope: s.scope, ended: true, forgetAt: s.endNanos + int64(contract.SettledMemory),
		result: contract.Settlement{ID: s.id, Upfront: s.reserved, Cost: s.reserved, AtNanos: s.endNanos}})
}

func (t *settleTable) forget(r *settledRecord) {
	t.byForget.remove(r)
	delete(t.settled, r.id)
}

// expire ends up to limit reservations whose TTL is over by now (charged
// in full: remembered as ended) and forgets the settlements remembered
// long enough.
func (t *settleTable) expire(now int64, limit int) {
	for s := t.byEnd.first(); limit > 0 && s != nil && s.endNanos <= now; s, limit = t.byEnd.first(), limit-1 {
		t.end(s)
	}
	for r := t.byForget.first(); limit > 0 && r != nil && r.forgetAt <= now; r, limit = t.byForget.first(), limit-1 {
		t.forget(r)
	}
}

// openReservation records the reservation of an admitted request with
// Settle, at the entry's position, and sets its ID in res.
func (f *FSM) openReservation(now int64, req *Request, res *Result, position int) {
	s := &openSettlement{id: settlementID(f.lastIndex, position), scope: req.Scope, reserved: req.Checks[0].Cost,
		endNanos: now + req.Settle.TTLNanos}
	for i := range req.Checks {
		t, err := f.resolve(now, &req.Checks[i])
		if err != nil { // resolved a moment ago, in the same entry
			return
		}
		var debt int64
		var version uint64
		if t.policy != nil {
			debt, version = min(t.policy.policy.MaxDebt, t.limit.Capacity()), t.policy.version
		}
		s.targets = append(s.targets, settleTarget{id: t.id, limit: *t.limit, maxDebt: debt, version: version,
			reservation: algorithms.ChargedUpfront(*t.limit, t.state, now, t.cost)})
	}
	f.settles.addOpen(s)
	res.SettlementID = s.id
}

// applySettle settles a reservation at the command's time.
func (f *FSM) applySettle(cmd *SettleCommand) any {
	req := contract.SettleRequest{ID: cmd.ID, Cost: cmd.Cost, Scope: cmd.Scope}
	if err := req.Validate(); err != nil {
		return err
	}
	now := f.advance(cmd.NowNanos)
	if r := f.settles.settled[cmd.ID]; r != nil && r.scope == cmd.Scope {
		switch {
		case r.ended:
			return contract.NotFound("settlement_id", "the reservation %s ended unsettled at %s and stays charged in full", cmd.ID, time.Unix(0, r.result.AtNanos).UTC().Format(time.RFC3339Nano))
		case r.cost != cmd.Cost:
			return contract.Conflict("settlement_id", "the reservation %s was settled already, with cost %d", cmd.ID, r.cost)
		}
		out := r.result
		out.Duplicate = true
		return &SettleResult{Settlement: out}
	}
	s := f.settles.open[cmd.ID]
	if s == nil || s.scope != cmd.Scope {
		return contract.NotFound("settlement_id", "no open reservation %s", cmd.ID)
	}
	if s.endNanos <= now {
		// Ended, and not yet swept (expire ends a bounded number per
		// entry): as late as if it had been.
		f.settles.end(s)
		return contract.NotFound("settlement_id", "the reservation %s ended unsettled at %s and stays charged in full", cmd.ID, time.Unix(0, s.endNanos).UTC().Format(time.RFC3339Nano))
	}
	out := contract.Settlement{ID: s.id, Upfront: s.reserved, Cost: cmd.Cost, AtNanos: now}
	for i := range s.targets {
		refunded, charged, wait := f.settleTarget(now, &s.targets[i], s.reserved, cmd.Cost)
		if i == 0 {
			out.Refunded, out.Charged = refunded, charged
		}
		out.Refunded, out.Charged = min(out.Refunded, refunded), min(out.Charged, charged)
		out.RetryAfter = max(out.RetryAfter, time.Duration(wait))
	}
	out.Forgiven = max(cmd.Cost-s.reserved-out.Charged, 0)
	f.settles.removeOpen(s)
	f.settles.remember(&settledRecord{id: s.id, scope: s.scope, cost: cmd.Cost, result: out, forgetAt: now + int64(contract.SettledMemory)})
	return &SettleResult{Settlement: out}
}

// settleTarget settles one check of a reservation with cost: it gives back
// or charges the difference on the check's bucket, and returns what it gave
// back, what it charged, and how long until the bucket admits a unit again
// when it is left in debt.
func (f *FSM) settleTarget(now int64, t *settleTarget, reserved, cost int64) (refunded, charged, wait int64) {
	same := true // the check's limit is the one it was reserved under
	if t.id.policy != "" {
		e := f.policies[t.id.policy]
		same = e != nil && e.version == t.version
		if e == nil {
			return 0, 0, 0 // the policy is gone, and its limits with it
		}
	}
	slot, state, limit, live := f.buckets.get(t.id)
	if !live {
		if !same {
			return 0, 0, 0 // the key's limit under the changed policy is not known here
		}
		limit = t.limit
	}
	var next algorithms.State
	switch {
	case cost < reserved && live && same && !t.forfeit && limit == t.limit:
		next, refunded = algorithms.Refund(limit, state, now, t.reservation, reserved-cost)
		if refunded > 0 {
			f.buckets.update(slot, t.id, limit, next)
		}
	case cost > reserved:
		next, charged = algorithms.Charge(limit, state, now, cost-reserved, min(t.maxDebt, limit.Capacity()))
		switch {
		case charged == 0:
		case live:
			f.buckets.update(slot, t.id, limit, next)
		default:
			f.buckets.create(t.id, limit, next)
		}
		if d, _ := algorithms.Decide(limit, next, now, 1); !d.Allowed {
			wait = int64(d.RetryAfter)
		}
	}
	return refunded, charged, wait
}

// forfeitRefunds marks the reservations on key as having nothing to give
// back: the key was reset, so the units they took are not in its state.
func (t *settleTable) forfeitRefunds(key string) {
	for _, s := range t.open {
		for i := range s.targets {
			if s.targets[i].id.key == key {
				s.targets[i].forfeit = true
			}
		}
	}
}

// The snapshot's records of the table.
type (
	openSettlementRecord struct {
		ID, Scope          string
		Reserved, EndNanos int64
		Targets            []settleTargetRecord
	}
	settleTargetRecord struct {
		Key, Policy          string
		Algorithm            algorithms.Algorithm
		Rate, Period, Burst  int64
		At, Units, TAT, Frac int64
		MaxDebt              int64
		Forfeit              bool
		Version              uint64
	}
	settledSnapshotRecord struct {
		ID, Scope string
		Cost      int64
		Ended     bool
		Result    contract.Settlement
		ForgetAt  int64
	}
)

func (t *settleTable) records() (open []openSettlementRecord, settled []settledSnapshotRecord) {
	for _, s := range t.open {
		rec := openSettlementRecord{ID: s.id, Scope: s.scope, Reserved: s.reserved, EndNanos: s.endNanos}
		for _, tg := range s.targets {
			rec.Targets = append(rec.Targets, settleTargetRecord{Key: tg.id.key, Policy: tg.id.policy,
				Algorithm: tg.limit.Algorithm, Rate: tg.limit.Rate, Period: int64(tg.limit.Period), Burst: tg.limit.Burst,
				At: tg.reservation.AtNanos, Units: tg.reservation.Units, TAT: tg.reservation.TAT, Frac: tg.reservation.TATFrac,
				MaxDebt: tg.maxDebt, Forfeit: tg.forfeit, Version: tg.version})
		}
		open = append(open, rec)
	}
	for _, r := range t.settled {
		settled = append(settled, settledSnapshotRecord{ID: r.id, Scope: r.scope, Cost: r.cost, Ended: r.ended, Result: r.result, ForgetAt: r.forgetAt})
	}
	return open, settled
}

func (f *FSM) restoreOpenSettlement(rec *openSettlementRecord) error {
	if rec.ID == "" || len(rec.ID) > contract.MaxSettlementIDBytes || f.settles.open[rec.ID] != nil || f.settles.refuseOpen(rec.Scope) != nil ||
		len(rec.Targets) == 0 || len(rec.Targets) > contract.MaxChecks || rec.Reserved < 1 || rec.EndNanos <= 0 {
		return errors.New("bad, repeated or too many")
	}
	s := &openSettlement{id: rec.ID, scope: rec.Scope, reserved: rec.Reserved, endNanos: rec.EndNanos}
	for _, tr := range rec.Targets {
		l := algorithms.Limit{Algorithm: tr.Algorithm, Rate: tr.Rate, Period: time.Duration(tr.Period), Burst: tr.Burst}
		if err := l.Validate(); err != nil {
			return err
		}
		if tr.Units != rec.Reserved || tr.MaxDebt < 0 || tr.MaxDebt > l.Capacity() || (tr.Policy != "" && !validBucketOwner(tr.Policy)) || contract.ValidateKey(tr.Key) != nil {
			return fmt.Errorf("target of %s out of range", rec.ID)
		}
		id := bucketKey{key: tr.Key, policy: tr.Policy}
		if tr.Policy == "" {
			id.limit = l
		}
		s.targets = append(s.targets, settleTarget{id: id, limit: l, maxDebt: tr.MaxDebt, forfeit: tr.Forfeit, version: tr.Version,
			reservation: algorithms.UpfrontCharge{AtNanos: tr.At, Units: tr.Units, TAT: tr.TAT, TATFrac: tr.Frac}})
	}
	f.settles.addOpen(s)
	return nil
}

func (f *FSM) restoreSettled(rec *settledSnapshotRecord) error {
	if rec.ID == "" || len(rec.ID) > contract.MaxSettlementIDBytes || f.settles.settled[rec.ID] != nil || len(f.settles.settled) >= contract.MaxSettlements {
		return errors.New("bad, repeated or too many")
	}
	f.settles.remember(&settledRecord{id: rec.ID, scope: rec.Scope, cost: rec.Cost, ended: rec.Ended, result: rec.Result, forgetAt: rec.ForgetAt})
	return nil
}
