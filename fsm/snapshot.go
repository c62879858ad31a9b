package fsm

import (
	"bufio"
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/msgpack"
	"github.com/limitnode/limitnode/rls"
)

// ErrCorruptSnapshot is returned by Restore for a snapshot it cannot read.
// The FSM keeps the state it had.
var ErrCorruptSnapshot = errors.New("fsm: corrupt snapshot")

// snapshotHeader opens a snapshot (snapshot_sections.go): its version, and
// the state that is not records. The counts of records (Buckets to
// ShareHolders) are version 1's; version 2 tags each section instead and
// writes them 0. Fields are appended, never reordered: a header written
// before a field restores with its zero value.
type snapshotHeader struct {
	Version    int
	NowNanos   int64
	Buckets    int
	RequestIDs int
	Nodes      int
	Policies   int
	Leases     int
	// RLSDomains and Waiters come last: a snapshot written before them
	// restores with none.
	RLSDomains int
	Waiters    int
	// ClusterID comes after them, for the same reason; a backup's state
	// leaves it empty (withoutMembers). So do ReachedNanos and StepTerm,
	// which bound how far the next entries may move time.
	ClusterID    string
	ReachedNanos int64
	StepTerm     uint64
	// Blocks and RLSVersions come after those, for the same reason.
	Blocks      int
	RLSVersions int
	// Audit (the audit trail's entries, oldest first) and AuditDropped
	// (how many it dropped) come last, and the entries after every other
	// record; a backup leaves them out (the trail is the cluster's own).
	Audit        int
	AuditDropped int64
	// Penalties (the counts of denials toward penalties) come after the
	// other fields; their records before the audit trail's.
	Penalties int
	// OpenSettlements (reservations waiting to be settled) and Settled
	// (settlements remembered) likewise; their records after the
	// penalties'.
	OpenSettlements, Settled int
	// ShareHolders (the holder and proof of each outstanding share that
	// has them) likewise; their records after the settlements'.
	ShareHolders int
	// RestoreLeadNanos (how far restores moved time ahead) comes last; a
	// backup leaves it out, as it does ReachedNanos.
	RestoreLeadNanos int64
}

type bucketRecord struct {
	Key       string
	Policy    string // "" for an inline limit; the limit below is then the key's
	Algorithm algorithms.Algorithm
	Rate      int64
	Period    int64
	Burst     int64
	At        int64
	Frac      int64
	Count     int64
	Previous  int64
	Log       []int64
	// Shares come last: a snapshot written before them restores with none.
	Shares []algorithms.Share
}

type requestIDRecord struct {
	ID      string
	AtNanos int64
	Result  Result
	// Scope and Fingerprint come last: a snapshot written before them
	// restores with an empty scope and an unknown fingerprint.
	Scope       string
	Fingerprint uint64
}

type policyRecord struct {
	Policy       contract.Policy
	ShadowDenied int64
	// Version comes last: a snapshot written before it restores with 0.
	Version uint64
}

// rlsVersionRecord is the index of the entry that put a domain.
type rlsVersionRecord struct {
	Domain string
	Index  uint64
}

type snapshot struct {
	header      snapshotHeader
	frozen      *frozenBuckets // written by writeTo, outside the FSM lock
	requestIDs  []requestIDRecord
	nodes       []NodeCommand
	policies    []policyRecord
	leases      []leaseRecord
	rlsConfigs  []*rls.Config
	waiters     []waiterRecord
	blocks      []contract.Block
	rlsVersions []rlsVersionRecord
	audit       []contract.AuditEntry
	penalties   []penaltyRecord
	settleOpen  []openSettlementRecord
	settled     []settledSnapshotRecord
	holders     []shareHolderRecord
}

// Digest returns the index of the last entry applied and a SHA-256 of the
// state as a snapshot would write it: two replicas that applied the same
// entries return the same pair. Tests compare replicas with it.
func (f *FSM) Digest() (uint64, [sha256.Size]byte) {
	f.mu.Lock()
	snap, index := f.copyState(), f.lastIndex
	f.mu.Unlock()
	return index, snap.digest()
}

// digest is the SHA-256 of the snapshot's canonical form.
func (s *snapshot) digest() [sha256.Size]byte {
	h := sha256.New()
	_ = s.writeTo(h, true) // a hash.Hash never fails to write
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// withoutMembers is the snapshot without the members' HTTP addresses and
// the lease queues' waiters: the limits state alone (buckets, request IDs,
// policies, leases, time), which is what a backup carries from one cluster
// to another.
func (s *snapshot) withoutMembers() *snapshot {
	out := *s
	out.nodes = nil
	// Waiters are callers connected to this cluster: in another, nobody
	// would be told of their grants, and the slots would idle until the
	// leases expired.
	out.waiters = nil
	// The audit trail is the cluster's own: a restore keeps it.
	out.audit = nil
	out.header.AuditDropped = 0
	// The cluster's ID names the members' cluster, not the limits: a
	// restored cluster keeps its own (identity.go).
	out.header.ClusterID = ""
	// How far the next entries may move time is the cluster's, too.
	out.header.ReachedNanos, out.header.StepTerm, out.header.RestoreLeadNanos = 0, 0, 0
	return &out
}

// LimitsDigest returns the index of the last entry applied and the digest
// of the limits state alone: Digest without the members' HTTP addresses.
// A cluster restored from a backup holds the backup's limits digest.
func (f *FSM) LimitsDigest() (uint64, [sha256.Size]byte) {
	f.mu.Lock()
	snap, index := f.copyState(), f.lastIndex
	f.mu.Unlock()
	return index, snap.withoutMembers().digest()
}

// LastIndex returns the index of the last log entry Apply was given (0
// after a restore until the next entry).
func (f *FSM) LastIndex() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastIndex
}

// Backup returns the index of the last entry applied and a frozen copy of
// the state at that index, to be written with its Persist (or WriteTo).
func (f *FSM) Backup() (uint64, *BackupState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	snap := f.copyState()
	// The audit trail is the cluster's own: a restore keeps the one it
	// has (applyRestoreCommit).
	snap.audit = nil
	snap.header.AuditDropped = 0
	return f.lastIndex, &BackupState{snap: snap}
}

// BackupState is the state frozen for a backup.
type BackupState struct{ snap *snapshot }

// Write writes the state in the form Restore reads.
func (b *BackupState) Write(w io.Writer) error { return b.snap.writeTo(w, false) }

// LimitsDigest is the digest of the frozen limits state (see
// FSM.LimitsDigest).
func (b *BackupState) LimitsDigest() [sha256.Size]byte { return b.snap.withoutMembers().digest() }

// Snapshot copies the state. Raft calls it on the goroutine that applies, so
// the copy is consistent; Persist then writes it while applies go on.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.staged != nil {
		return nil, ErrRestoreStaged
	}
	return f.copyState(), nil
}

// copyState copies the state for a snapshot; f.mu must be held.
func (f *FSM) copyState() *snapshot {
	frozen := f.buckets.freeze()
	s := &snapshot{frozen: &frozen}
	for _, e := range f.dedupQueue[f.dedupHead:] {
		scope, id := splitDedupKey(e.key)
		s.requestIDs = append(s.requestIDs, requestIDRecord{ID: id, AtNanos: e.atNano, Result: e.result, Scope: scope, Fingerprint: e.fingerprint})
	}
	for id, addr := range f.nodes {
		s.nodes = append(s.nodes, NodeCommand{ID: id, HTTPAddr: addr})
	}
	for _, e := range f.policies {
		s.policies = append(s.policies, policyRecord{Policy: e.policy, ShadowDenied: e.shadowDenied, Version: e.version})
	}
	for _, l := range f.leases.byID {
		s.leases = append(s.leases, l.record())
	}
	for _, d := range f.rlsDomains {
		s.rlsConfigs = append(s.rlsConfigs, d.Config())
	}
	s.waiters = f.leases.waiterRecords()
	for _, b := range f.blocks.byKey {
		s.blocks = append(s.blocks, b.Block)
	}
	for domain, index := range f.rlsVersions {
		s.rlsVersions = append(s.rlsVersions, rlsVersionRecord{Domain: domain, Index: index})
	}
	s.audit = slices.Clone(f.audit.live())
	for _, c := range f.penalties.byKey {
		s.penalties = append(s.penalties, penaltyRecord{Owner: c.owner, Key: c.key, EndNanos: c.endNanos, Count: c.count, Opener: c.opener})
	}
	s.settleOpen, s.settled = f.settles.records()
	s.holders = f.shares.holders()
	s.header = snapshotHeader{NowNanos: f.nowNanos, ClusterID: f.clusterID, ReachedNanos: f.reachedNanos, StepTerm: f.stepTerm,
		AuditDropped: f.audit.dropped, RestoreLeadNanos: f.restoreLeadNanos}
	return s
}

// Persist writes the copy taken by Snapshot, buckets in the store's order.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.writeTo(sink, false); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("fsm: persist snapshot: %w", err)
	}
	return sink.Close()
}

// writeTo writes the snapshot. Canonical is what digests hash: version 1's
// layout, the buckets in key order, so that the bytes are a function of
// the state alone (Digest, and tests that compare states). Otherwise it is
// version 2, the buckets in the order of the store's slabs,
// which is how Raft's snapshots are written: sorting a million keys cost
// five times the rest of the snapshot on two cores, and restore reads either.
func (s *snapshot) writeTo(w io.Writer, canonical bool) error {
	slices.SortFunc(s.nodes, func(a, b NodeCommand) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(s.policies, func(a, b policyRecord) int { return strings.Compare(a.Policy.Name, b.Policy.Name) })
	slices.SortFunc(s.leases, func(a, b leaseRecord) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(s.rlsConfigs, func(a, b *rls.Config) int { return strings.Compare(a.Domain, b.Domain) })
	slices.SortFunc(s.blocks, func(a, b contract.Block) int { return strings.Compare(a.Key, b.Key) })
	slices.SortFunc(s.rlsVersions, func(a, b rlsVersionRecord) int { return strings.Compare(a.Domain, b.Domain) })
	slices.SortFunc(s.settleOpen, func(a, b openSettlementRecord) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(s.settled, func(a, b settledSnapshotRecord) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(s.penalties, func(a, b penaltyRecord) int {
		return cmp.Or(strings.Compare(a.Owner, b.Owner), strings.Compare(a.Key, b.Key))
	})

	bw := bufio.NewWriterSize(w, 64<<10)
	version := snapshotVersion
	if canonical {
		version = snapshotVersion1
	}
	return s.writeSections(&sectionWriter{enc: codec.NewEncoder(bw, msgpack.Handle), bw: bw, canonical: canonical}, version)
}

func (r *bucketRecord) limit() algorithms.Limit {
	return algorithms.Limit{Algorithm: r.Algorithm, Rate: r.Rate, Period: time.Duration(r.Period), Burst: r.Burst}
}

// id is the record's bucket key: for a policy bucket the limit is not part
// of it.
func (r *bucketRecord) id() bucketKey {
	if r.Policy != "" {
		return bucketKey{key: r.Key, policy: r.Policy}
	}
	return bucketKey{key: r.Key, limit: r.limit()}
}

// snapshotYieldEvery is how many bucket records a snapshot writes between
// yields: about a millisecond of work.
const snapshotYieldEvery = 4096

// Release is a no-op: the copy is garbage once Persist returns.
func (s *snapshot) Release() {}

// Restore replaces the whole state with a snapshot's. It validates every
// record first and swaps the state in only when all of it is sound, so a
// corrupt snapshot leaves the FSM as it was and returns an error wrapping
// ErrCorruptSnapshot.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	fresh := New(f.logger)
	if err := fresh.readSnapshot(bufio.NewReaderSize(rc, 64<<10)); err != nil {
		return fmt.Errorf("%w: %w", ErrCorruptSnapshot, err)
	}
	f.mu.Lock()
	f.nowNanos, f.buckets = fresh.nowNanos, fresh.buckets
	f.dedup, f.dedupQueue, f.dedupHead, f.dedupPerScope = fresh.dedup, fresh.dedupQueue, fresh.dedupHead, fresh.dedupPerScope
	f.nodes, f.policies, f.leases, f.rlsDomains = fresh.nodes, fresh.policies, fresh.leases, fresh.rlsDomains
	f.totalOverrides, f.shares = fresh.totalOverrides, fresh.shares
	f.blocks, f.rlsVersions, f.audit, f.penalties = fresh.blocks, fresh.rlsVersions, fresh.audit, fresh.penalties
	f.settles = fresh.settles
	f.publishSharing()
	f.clusterID = fresh.clusterID
	f.reachedNanos, f.stepTerm, f.restoreLeadNanos = fresh.reachedNanos, fresh.stepTerm, fresh.restoreLeadNanos
	f.staged = nil
	f.announceClusterID()
	f.mu.Unlock()
	if f.onRestore != nil {
		f.onRestore()
	}
	if f.onRaise != nil {
		f.onRaise("")
	}
	return nil
}

func (f *FSM) readSnapshot(r io.Reader) error {
	dec := codec.NewDecoder(r, msgpack.Handle)
	h, err := readHeader(dec)
	if err != nil {
		return err
	}
	f.nowNanos = h.NowNanos
	f.clusterID = h.ClusterID
	f.reachedNanos, f.stepTerm, f.restoreLeadNanos = h.ReachedNanos, h.StepTerm, h.RestoreLeadNanos
	if h.AuditDropped < 0 {
		return fmt.Errorf("an audit trail that dropped %d entries", h.AuditDropped)
	}
	f.audit.dropped = h.AuditDropped
	return f.readSections(dec, &h)
}

// readHeader reads and checks a snapshot's header.
func readHeader(dec *codec.Decoder) (snapshotHeader, error) {
	var h snapshotHeader
	if err := dec.Decode(&h); err != nil {
		return h, fmt.Errorf("header: %w", err)
	}
	if h.Version != snapshotVersion && h.Version != snapshotVersion1 {
		return h, fmt.Errorf("version %d, want %d or %d", h.Version, snapshotVersion1, snapshotVersion)
	}
	if err := checkStamp(h.NowNanos); err != nil {
		return h, err
	}
	if err := checkStamp(h.ReachedNanos); err != nil {
		return h, err
	}
	if h.RestoreLeadNanos < 0 || h.RestoreLeadNanos > int64(MaxRestoreAhead) {
		return h, fmt.Errorf("restore lead %d out of range", h.RestoreLeadNanos)
	}
	if h.ClusterID != "" {
		if err := contract.ValidateClusterID(h.ClusterID); err != nil {
			return h, err
		}
	}
	return h, nil
}

func (f *FSM) restoreBucket(rec *bucketRecord) error {
	l := rec.limit()
	if err := l.Validate(); err != nil {
		return err
	}
	if rec.Policy != "" && !validBucketOwner(rec.Policy) {
		return errors.New("bad policy name or domain")
	}
	s := algorithms.State{At: rec.At, Frac: rec.Frac, Count: rec.Count, Previous: rec.Previous, Log: rec.Log, Shares: rec.Shares}
	if rec.Key == "" || len(rec.Key) > contract.MaxKeyBytes || !l.ValidState(s) {
		return errors.New("key or state out of range")
	}
	if !f.buckets.add(rec.id(), l, s) {
		return fmt.Errorf("duplicate key %q", rec.Key)
	}
	for _, sh := range s.Shares {
		if sh.Until > f.nowNanos {
			f.shares.add(ledgerEntry{Share: sh, policy: rec.Policy})
		}
	}
	return nil
}

func (f *FSM) restoreRequestID(rec *requestIDRecord) error {
	key := dedupKey(rec.Scope, rec.ID)
	if rec.ID == "" || len(rec.ID) > contract.MaxRequestIDBytes || len(rec.Scope) > contract.MaxScopeBytes || strings.IndexByte(rec.Scope, 0) >= 0 || f.dedup[key] != nil {
		return errors.New("empty, too long or repeated")
	}
	f.remember(&dedupEntry{key: key, atNano: rec.AtNanos, result: rec.Result, fingerprint: rec.Fingerprint})
	return nil
}

func (f *FSM) restoreNode(rec *NodeCommand) error {
	if rec.ID == "" {
		return errors.New("empty ID")
	}
	f.nodes[rec.ID] = rec.HTTPAddr
	return nil
}

func (f *FSM) restorePolicy(rec *policyRecord) error {
	if err := rec.Policy.Validate(); err != nil {
		return err
	}
	if f.policies[rec.Policy.Name] != nil || len(f.policies) >= contract.MaxPolicies || f.totalOverrides+len(rec.Policy.Overrides) > contract.MaxTotalOverrides {
		return errors.New("repeated, or too many")
	}
	e := newPolicyEntry(rec.Policy)
	e.shadowDenied, e.version = rec.ShadowDenied, rec.Version
	f.policies[rec.Policy.Name] = e
	f.totalOverrides += len(rec.Policy.Overrides)
	return nil
}

func (f *FSM) restoreRLSDomain(c *rls.Config) error {
	if f.rlsDomains[c.Domain] != nil {
		return fmt.Errorf("%q repeated", c.Domain)
	}
	if err := f.putRLSConfig(*c); err != nil {
		return fmt.Errorf("%v", err)
	}
	return nil
}

func (f *FSM) restoreBlock(rec *contract.Block) error {
	if err := contract.ValidateKey(rec.Key); err != nil {
		return err
	}
	if err := contract.ValidateBlockReason(rec.Reason); err != nil {
		return err
	}
	if rec.Penalty != "" && !validBucketOwner(rec.Penalty) {
		return errors.New("bad penalty owner")
	}
	if checkStamp(rec.SinceNanos) != nil || rec.UntilNanos <= rec.SinceNanos || rec.UntilNanos-rec.SinceNanos > int64(contract.MaxBlockTTL) {
		return errors.New("times out of range")
	}
	if f.blocks.byKey[rec.Key] != nil {
		return fmt.Errorf("key %q repeated", rec.Key)
	}
	if _, ok := f.blocks.put(*rec); !ok {
		return errors.New("too many blocks")
	}
	return nil
}

func (f *FSM) restoreRLSVersion(rec *rlsVersionRecord) error {
	if f.rlsDomains[rec.Domain] == nil {
		return fmt.Errorf("a version of domain %q, which the snapshot does not hold", rec.Domain)
	}
	if _, ok := f.rlsVersions[rec.Domain]; ok {
		return fmt.Errorf("%q repeated", rec.Domain)
	}
	f.rlsVersions[rec.Domain] = rec.Index
	return nil
}

func (f *FSM) restoreAuditEntry(rec *contract.AuditEntry) error {
	if err := validateAuditRecord(rec); err != nil {
		return err
	}
	if live := f.audit.live(); len(live) > 0 && live[len(live)-1].Index >= rec.Index {
		return errors.New("entries out of order")
	}
	f.audit.add(*rec)
	return nil
}
