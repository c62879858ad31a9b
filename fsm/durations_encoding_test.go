package fsm

import (
	"encoding/hex"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/msgpack"
)

// TestGoTypesInTheLogEncodeAsBefore pins the msgpack bytes of the Go API's
// types that the log, snapshots and forwarded messages carry. Their
// durations are time.Duration and some fields were renamed for Go callers;
// the bytes are those the same values had as int64 nanoseconds under the
// old names (structs encode by position), so entries, snapshots and
// backups written before read the same, and nodes of both versions talk.
func TestGoTypesInTheLogEncodeAsBefore(t *testing.T) {
	t.Parallel()
	limit := algorithms.Limit{Algorithm: algorithms.GCRA, Rate: 7, Period: 90 * time.Second, Burst: 3}
	tests := []struct {
		name  string
		value any
		want  string
	}{
		{"a limit", limit, "940207d300000014f46b040003"},
		{"a decision", algorithms.Decision{Allowed: true, Limit: 3, Remaining: 1, ResetAfter: 123456789, RetryAfter: 5, RefillAfter: 77, Wait: 1 << 40},
			"97c30301d2075bcd15054dd30000010000000000"},
		{"a denial's cause", contract.DeniedBy{Check: 1, Policy: "p", PolicyVersion: 9, Limit: limit, Cause: "limit"},
			"9501a17009940207d300000014f46b040003a56c696d6974"},
		{"a policy's local shares", contract.LocalShares{TTL: 200 * time.Millisecond, MaxUnits: 4}, "92d20bebc20004"},
		{"a settlement", contract.Settlement{ID: "s1.0", Upfront: 40, Cost: 12, Refunded: 28, RetryAfter: time.Hour, AtNanos: 5, Duplicate: true},
			"99a473312e30280c1c0000d30000034630b8a00005c3"},
		{"an up-front charge", algorithms.UpfrontCharge{AtNanos: 1, Units: 2, TAT: 3, TATFrac: 4}, "9401020304"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b []byte
			if err := codec.NewEncoderBytes(&b, msgpack.Handle).Encode(tt.value); err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(b); got != tt.want {
				t.Fatalf("encodes as %s, want %s", got, tt.want)
			}
		})
	}
}
