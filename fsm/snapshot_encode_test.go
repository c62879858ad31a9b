package fsm

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/internal/msgpack"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/limitnode/limitnode/algorithms"
	"pgregory.net/rapid"
)

// codecBytes is what the msgpack codec writes for v.
func codecBytes(t interface{ Fatal(...any) }, v any) []byte {
	var buf bytes.Buffer
	if err := codec.NewEncoder(&buf, msgpack.Handle).Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestAppendBucketRecordMatchesTheCodec(t *testing.T) {
	t.Parallel()
	edges := []int64{0, 1, 31, 32, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64,
		-1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, math.MinInt32 - 1, math.MinInt64}
	tests := []struct {
		name string
		r    bucketRecord
	}{
		{"empty", bucketRecord{}},
		{"token bucket", bucketRecord{Key: "user:42", Rate: 100, Period: 60e9, Burst: 100, At: 1_780_000_000_000_000_000, Frac: 12345}},
		{"policy", bucketRecord{Key: "t", Policy: "per-tenant", Algorithm: algorithms.SlidingWindowLog, Log: []int64{1, 2, 3}}},
		{"empty log", bucketRecord{Key: "k", Log: []int64{}}},
		{"long log", bucketRecord{Key: "k", Log: make([]int64, 70000)}},
		{"key lengths", bucketRecord{Key: strings.Repeat("k", 31), Policy: strings.Repeat("p", 32)}},
		{"long key", bucketRecord{Key: strings.Repeat("k", 256), Policy: strings.Repeat("p", 70000)}},
		{"edge integers", bucketRecord{Rate: edges[0], Period: edges[1], Burst: edges[2], At: edges[3], Frac: edges[4], Count: edges[5], Previous: edges[6], Log: edges}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got, want := appendBucketRecord(nil, &tt.r), codecBytes(t, &tt.r); !bytes.Equal(got, want) {
				t.Fatalf("appendBucketRecord differs from the codec:\n got % x\nwant % x", head(got), head(want))
			}
		})
	}
}

func head(b []byte) []byte { return b[:min(len(b), 64)] }

func TestAppendBucketRecordMatchesTheCodecForAnyRecord(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		r := bucketRecord{
			Key:       rapid.String().Draw(rt, "key"),
			Policy:    rapid.String().Draw(rt, "policy"),
			Algorithm: algorithms.Algorithm(rapid.Uint8().Draw(rt, "algorithm")),
			Rate:      rapid.Int64().Draw(rt, "rate"),
			Period:    rapid.Int64().Draw(rt, "period"),
			Burst:     rapid.Int64().Draw(rt, "burst"),
			At:        rapid.Int64().Draw(rt, "at"),
			Frac:      rapid.Int64().Draw(rt, "frac"),
			Count:     rapid.Int64().Draw(rt, "count"),
			Previous:  rapid.Int64().Draw(rt, "previous"),
			Log:       rapid.SliceOfN(rapid.Int64(), -1, 40).Draw(rt, "log"),
		}
		if rapid.Bool().Draw(rt, "nil log") {
			r.Log = nil
		}
		for range rapid.IntRange(0, 20).Draw(rt, "shares") {
			r.Shares = append(r.Shares, algorithms.Share{ID: rapid.Uint64().Draw(rt, "id"), Units: rapid.Int64().Draw(rt, "units"), Until: rapid.Int64().Draw(rt, "until")})
		}
		if got, want := appendBucketRecord(nil, &r), codecBytes(rt, &r); !bytes.Equal(got, want) {
			rt.Fatalf("differs from the codec:\n got % x\nwant % x", head(got), head(want))
		}
	})
}

// TestSnapshotBytesAreTheCodecs writes a snapshot of every algorithm, with
// more records than one yield interval, and compares it with the same
// records written by the codec alone: the hand-written records change
// nothing on disk.
func TestSnapshotBytesAreTheCodecs(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	algs := []algorithms.Algorithm{algorithms.TokenBucket, algorithms.LeakyBucket, algorithms.GCRA,
		algorithms.FixedWindow, algorithms.SlidingWindowLog, algorithms.SlidingWindowCounter}
	var reqs []Request
	for i := range 3 * snapshotYieldEvery {
		l := algorithms.Limit{Algorithm: algs[i%len(algs)], Rate: int64(10 + i%7), Period: time.Minute, Burst: int64(10 + i%7)}
		req := Request{Checks: []Check{inlineCheck(fmt.Sprintf("key-%d", i), l, int64(1+i%3))}}
		if i%80 == 0 {
			req.RequestID = fmt.Sprintf("id-%d", i)
		}
		reqs = append(reqs, req)
	}
	a.allow(t0, reqs...)
	snap, err := a.fsm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	s := snap.(*snapshot)
	// The reference: copies of the buckets sorted by their records' own
	// keys, as snapshots were written before eachSorted, all by the codec.
	var buckets []bucketRecord
	_ = s.frozen.each(func(id bucketKey, l algorithms.Limit, st algorithms.State) error {
		buckets = append(buckets, bucketRecord{
			Key: id.key, Policy: id.policy, Algorithm: l.Algorithm, Rate: l.Rate, Period: int64(l.Period), Burst: l.Burst,
			At: st.At, Frac: st.Frac, Count: st.Count, Previous: st.Previous, Log: st.Log, Shares: st.Shares,
		})
		return nil
	})
	slices.SortFunc(buckets, func(a, b bucketRecord) int { return a.id().compare(b.id()) })
	var got bytes.Buffer
	if err := s.writeTo(&got, true); err != nil {
		t.Fatal(err)
	}
	// The canonical form is version 1's layout: each section's count in
	// the header.
	h := s.header
	h.Version = snapshotVersion1
	for _, sec := range snapshotSections {
		*sec.v1Count(&h) = sec.count(s)
	}
	var want bytes.Buffer
	enc := codec.NewEncoder(&want, msgpack.Handle)
	for _, v := range []any{&h, buckets, s.requestIDs, s.nodes, s.policies, s.leases} {
		if header, ok := v.(*snapshotHeader); ok {
			if err := enc.Encode(header); err != nil {
				t.Fatal(err)
			}
			continue
		}
		rv := reflect.ValueOf(v)
		for i := range rv.Len() {
			if err := enc.Encode(rv.Index(i).Addr().Interface()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(buckets) != h.Buckets || len(buckets) <= snapshotYieldEvery {
		t.Fatalf("%d bucket records (header: %d), want more than %d", len(buckets), h.Buckets, snapshotYieldEvery)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("snapshot bytes differ from the codec's: %d vs %d bytes", got.Len(), want.Len())
	}
}
