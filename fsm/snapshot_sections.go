package fsm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/rls"
)

// A snapshot is a msgpack stream: a header, then the state's sections in
// the order of snapshotSections, each a run of records of one kind.
//
// Version 2, which Snapshot and Backup write, puts a tag before each
// section (sectionTag: its kind and how many records follow), so that a
// reader names what it does not know instead of misreading it. Version 1
// gave every section's count in the header instead, in a fixed order; it
// is still read, and it is the layout digests hash (Digest, LimitsDigest):
// a fixed layout keeps the digests of equal states equal on members that
// run two releases during an upgrade.
const (
	snapshotVersion  = 2
	snapshotVersion1 = 1
)

// sectionTag opens a section of a version-2 snapshot.
type sectionTag struct {
	Kind  string
	Count int
}

// section is one kind of record in a snapshot: how to count, write and
// read it, and where version 1's header keeps its count.
type section struct {
	kind string
	// most bounds the records a state holds (0: no bound of its own);
	// a snapshot that claims more is refused before it is read.
	most    int
	v1Count func(h *snapshotHeader) *int
	count   func(s *snapshot) int
	write   func(s *snapshot, w *sectionWriter) error
	read    func(f *FSM, dec *codec.Decoder, count int) error
}

// sectionWriter is where sections are written: records through the codec,
// buckets as raw bytes (appendBucketRecord) to the same buffer.
type sectionWriter struct {
	enc       *codec.Encoder
	bw        *bufio.Writer
	canonical bool // buckets in key order
}

// records is the section of a kind of record kept as a slice of the
// snapshot, each restored by restore.
func records[T any](kind string, most int, v1Count func(*snapshotHeader) *int, of func(*snapshot) []T, restore func(*FSM, *T) error) section {
	return section{
		kind: kind, most: most, v1Count: v1Count,
		count: func(s *snapshot) int { return len(of(s)) },
		write: func(s *snapshot, w *sectionWriter) error { return writeRecords(w.enc, of(s)) },
		read: func(f *FSM, dec *codec.Decoder, count int) error {
			return readRecords(dec, count, kind, func(rec *T) error { return restore(f, rec) })
		},
	}
}

// snapshotSections are the sections, in the order they are written and
// must be read: a record may refer only to records of the sections before
// it (a waiter to its lease's group, a domain's version to its domain).
var snapshotSections = []section{
	{
		kind: "bucket", v1Count: func(h *snapshotHeader) *int { return &h.Buckets },
		count: func(s *snapshot) int { return s.frozen.count },
		write: writeBuckets,
		read: func(f *FSM, dec *codec.Decoder, count int) error {
			if err := readRecords(dec, count, "bucket", f.restoreBucket); err != nil {
				return err
			}
			f.buckets.initHeap()
			return nil
		},
	},
	records("request ID", MaxDedupEntries, func(h *snapshotHeader) *int { return &h.RequestIDs },
		func(s *snapshot) []requestIDRecord { return s.requestIDs }, (*FSM).restoreRequestID),
	records("node", 0, func(h *snapshotHeader) *int { return &h.Nodes },
		func(s *snapshot) []NodeCommand { return s.nodes }, (*FSM).restoreNode),
	records("policy", 0, func(h *snapshotHeader) *int { return &h.Policies },
		func(s *snapshot) []policyRecord { return s.policies }, (*FSM).restorePolicy),
	records("lease", 0, func(h *snapshotHeader) *int { return &h.Leases },
		func(s *snapshot) []leaseRecord { return s.leases }, func(f *FSM, rec *leaseRecord) error { return f.leases.restore(*rec) }),
	records("RLS domain", 0, func(h *snapshotHeader) *int { return &h.RLSDomains },
		func(s *snapshot) []*rls.Config { return s.rlsConfigs }, func(f *FSM, c **rls.Config) error { return f.restoreRLSDomain(*c) }),
	records("waiter", 0, func(h *snapshotHeader) *int { return &h.Waiters },
		func(s *snapshot) []waiterRecord { return s.waiters }, func(f *FSM, rec *waiterRecord) error { return f.leases.restoreWaiter(*rec) }),
	records("block", 0, func(h *snapshotHeader) *int { return &h.Blocks },
		func(s *snapshot) []contract.Block { return s.blocks }, (*FSM).restoreBlock),
	records("RLS domain version", 0, func(h *snapshotHeader) *int { return &h.RLSVersions },
		func(s *snapshot) []rlsVersionRecord { return s.rlsVersions }, (*FSM).restoreRLSVersion),
	records("penalty count", 0, func(h *snapshotHeader) *int { return &h.Penalties },
		func(s *snapshot) []penaltyRecord { return s.penalties }, (*FSM).restorePenalty),
	records("open reservation", 0, func(h *snapshotHeader) *int { return &h.OpenSettlements },
		func(s *snapshot) []openSettlementRecord { return s.settleOpen }, (*FSM).restoreOpenSettlement),
	records("settlement", 0, func(h *snapshotHeader) *int { return &h.Settled },
		func(s *snapshot) []settledSnapshotRecord { return s.settled }, (*FSM).restoreSettled),
	records("share holder", 0, func(h *snapshotHeader) *int { return &h.ShareHolders },
		func(s *snapshot) []shareHolderRecord { return s.holders }, (*FSM).restoreShareHolder),
	records("audit entry", contract.MaxAuditEntries, func(h *snapshotHeader) *int { return &h.Audit },
		func(s *snapshot) []contract.AuditEntry { return s.audit }, (*FSM).restoreAuditEntry),
}

// writeSections writes the header and every section: version 2's tagged
// layout, or version 1's (the counts in the header) for a digest.
func (s *snapshot) writeSections(w *sectionWriter, version int) error {
	h := s.header
	h.Version = version
	if version == snapshotVersion1 {
		for _, sec := range snapshotSections {
			*sec.v1Count(&h) = sec.count(s)
		}
	}
	if err := w.enc.Encode(&h); err != nil {
		return err
	}
	for _, sec := range snapshotSections {
		if version != snapshotVersion1 {
			if err := w.enc.Encode(&sectionTag{Kind: sec.kind, Count: sec.count(s)}); err != nil {
				return err
			}
		}
		if err := sec.write(s, w); err != nil {
			return fmt.Errorf("%s records: %w", sec.kind, err)
		}
	}
	return w.bw.Flush()
}

// readSections reads every section after a header of version 2 (tagged)
// or 1 (counted in h), into f.
func (f *FSM) readSections(dec *codec.Decoder, h *snapshotHeader) error {
	if h.Version == snapshotVersion1 {
		for _, sec := range snapshotSections {
			if err := sec.readCounted(f, dec, *sec.v1Count(h)); err != nil {
				return err
			}
		}
		var extra any
		if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
			return errors.New("trailing data after the last record")
		}
		return nil
	}
	next := 0 // sections come in order, each at most once
	for {
		var tag sectionTag
		if err := dec.Decode(&tag); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("section tag: %w", err)
		}
		i := sectionIndex(tag.Kind)
		switch {
		case i < 0:
			return fmt.Errorf("a section of %q records, which this release does not know (was it written by a later one?)", tag.Kind)
		case i < next:
			return fmt.Errorf("a section of %q records out of order", tag.Kind)
		}
		next = i + 1
		if err := snapshotSections[i].readCounted(f, dec, tag.Count); err != nil {
			return err
		}
	}
}

// readCounted reads count records of the section, refusing a count it
// cannot hold before it reads one.
func (sec *section) readCounted(f *FSM, dec *codec.Decoder, count int) error {
	if count < 0 || sec.most > 0 && count > sec.most {
		return fmt.Errorf("%d %s records, out of range", count, sec.kind)
	}
	return sec.read(f, dec, count)
}

// sectionIndex is the place of kind in snapshotSections, or -1.
func sectionIndex(kind string) int {
	for i := range snapshotSections {
		if snapshotSections[i].kind == kind {
			return i
		}
	}
	return -1
}

// writeBuckets writes the bucket records, nearly all of a snapshot,
// without the codec's reflection (the same bytes, several times cheaper);
// and every few thousand it yields, so that on a small machine a snapshot
// of millions of keys does not hold a core for the scheduler's whole
// 10 ms slice while requests wait.
func writeBuckets(s *snapshot, w *sectionWriter) error {
	var rec []byte
	written := 0
	each := s.frozen.each
	if w.canonical {
		each = s.frozen.eachSorted
	}
	return each(func(id bucketKey, l algorithms.Limit, st algorithms.State) error {
		rec = appendBucketRecord(rec[:0], &bucketRecord{
			Key: id.key, Policy: id.policy, Algorithm: l.Algorithm, Rate: l.Rate, Period: int64(l.Period), Burst: l.Burst,
			At: st.At, Frac: st.Frac, Count: st.Count, Previous: st.Previous, Log: st.Log, Shares: st.Shares,
		})
		if _, err := w.bw.Write(rec); err != nil {
			return err
		}
		if written++; written%snapshotYieldEvery == 0 {
			runtime.Gosched()
		}
		return nil
	})
}

// writeRecords encodes records of one kind, in order: what readRecords
// reads back.
func writeRecords[T any](enc *codec.Encoder, records []T) error {
	for i := range records {
		if err := enc.Encode(&records[i]); err != nil {
			return err
		}
	}
	return nil
}

// readRecords decodes count records of one kind and hands each to restore,
// naming the record at fault in an error.
func readRecords[T any](dec *codec.Decoder, count int, kind string, restore func(*T) error) error {
	for i := range count {
		var rec T
		if err := dec.Decode(&rec); err != nil {
			return fmt.Errorf("%s %d: %w", kind, i, err)
		}
		if err := restore(&rec); err != nil {
			return fmt.Errorf("%s %d: %w", kind, i, err)
		}
	}
	return nil
}
