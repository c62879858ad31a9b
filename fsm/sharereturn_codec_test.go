package fsm

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/limitnode/limitnode/internal/msgpack"
	"github.com/limitnode/limitnode/rls"
)

func encodeForTest(t *testing.T, v any) []byte {
	t.Helper()
	var b []byte
	if err := codec.NewEncoderBytes(&b, msgpack.Handle).Encode(v); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFieldsAddedLastKeepTheEarlierBytes: a command or a rate_limit that
// does not use a field this release added is the same bytes as the release
// before it wrote, so that members of two releases apply each other's
// entries and digest equal states alike during an upgrade; one that uses
// it round-trips whole.
func TestFieldsAddedLastKeepTheEarlierBytes(t *testing.T) {
	t.Parallel()
	burst := uint32(5)
	ret := ReturnShareCommand{NowNanos: 7, Check: Check{Key: "k", Rate: 10}, ShareID: 3, Unspent: 2, Holder: "h", Proof: []byte{1, 2}, Background: true}
	rl := rls.RateLimit{Unit: "SECOND", RequestsPerUnit: 10, Name: "n", Algorithm: "gcra", Burst: &burst}
	tests := []struct {
		name            string
		now, before     any
		withNew, decode any
	}{
		{"a share return without RLS", &ret,
			&struct {
				NowNanos   int64
				Check      Check
				ShareID    uint64
				Unspent    int64
				Holder     string
				Proof      []byte
				Background bool
			}{NowNanos: 7, Check: Check{Key: "k", Rate: 10}, ShareID: 3, Unspent: 2, Holder: "h", Proof: []byte{1, 2}, Background: true},
			&ReturnShareCommand{NowNanos: 7, ShareID: 3, RLS: &rls.Query{Domain: "d", Descriptors: []rls.QueryDescriptor{{Entries: []rls.Entry{{Key: "a", Value: "b"}}, Hits: 1}}}},
			&ReturnShareCommand{}},
		{"a rate_limit without local_shares", &rl,
			&struct {
				Unit            string
				RequestsPerUnit uint32
				Unlimited       bool
				Name            string
				Replaces        []rls.Replace
				Algorithm       string
				Burst           *uint32
				Penalty         *rls.Penalty
			}{Unit: "SECOND", RequestsPerUnit: 10, Name: "n", Algorithm: "gcra", Burst: &burst},
			&rls.RateLimit{Unit: "SECOND", RequestsPerUnit: 10, LocalShares: &rls.LocalShares{TTL: "250ms"}},
			&rls.RateLimit{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if now, before := encodeForTest(t, tt.now), encodeForTest(t, tt.before); !bytes.Equal(now, before) {
				t.Fatalf("encoded as %x, the earlier release wrote %x", now, before)
			}
			for _, v := range []any{tt.now, tt.withNew} {
				got := reflect.New(reflect.TypeOf(tt.decode).Elem()).Interface()
				if err := codec.NewDecoderBytes(encodeForTest(t, v), msgpack.Handle).Decode(got); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, v) {
					t.Fatalf("decoded %+v, want %+v", got, v)
				}
			}
			// Into a value that holds the new field, the earlier layout
			// leaves it unset: a decoder reused across entries keeps
			// nothing of the one before.
			reused := reflect.New(reflect.TypeOf(tt.decode).Elem()).Interface()
			if err := codec.NewDecoderBytes(encodeForTest(t, tt.withNew), msgpack.Handle).Decode(reused); err != nil {
				t.Fatal(err)
			}
			if err := codec.NewDecoderBytes(encodeForTest(t, tt.now), msgpack.Handle).Decode(reused); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(reused, tt.now) {
				t.Fatalf("decoded over a value with the new field: %+v, want %+v", reused, tt.now)
			}
		})
	}
}
