package fsm

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/limitnode/limitnode/contract"
)

// TestKeyFloodStaysBounded floods the state with a million distinct keys
// under a cap of 100,000: the cap holds, memory follows the cap rather than
// the flood, and a key that was there before keeps being limited.
func TestKeyFloodStaysBounded(t *testing.T) {
	t.Parallel()
	const flood, capKeys = 1_000_000, 100_000
	for _, failOpen := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail_open=%v", failOpen), func(t *testing.T) {
			f := newApplier(t).fsm
			apply := func(now int64, reqs []Request) []Result {
				f.mu.Lock()
				defer f.mu.Unlock()
				return f.applyAllow(&AllowCommand{NowNanos: now, Requests: reqs, MaxKeys: capKeys, KeyLimitFailOpen: failOpen}).Results
			}
			hourly := hourly(5)
			if r := apply(t0, []Request{one("existing", hourly, 1)})[0]; !r.Allowed {
				t.Fatal("the first key was refused")
			}
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			refused, admitted := 0, 0
			reqs := make([]Request, 0, 4096)
			for i := 0; i < flood; {
				reqs = reqs[:0]
				for ; len(reqs) < cap(reqs) && i < flood; i++ {
					reqs = append(reqs, one(fmt.Sprintf("flood-%07d", i), hourly, 1))
				}
				for _, r := range apply(t0, reqs) {
					switch {
					case r.Rejection != nil && r.Rejection.Code == contract.CodeResourceExhausted:
						refused++
					case r.Allowed:
						admitted++
					default:
						t.Fatalf("unexpected result %+v", r)
					}
				}
			}
			if got := f.Stats().Keys; got != capKeys {
				t.Fatalf("%d keys live after the flood, want the cap %d", got, capKeys)
			}
			if failOpen && (admitted != flood || refused != 0) {
				t.Fatalf("fail-open: %d admitted, %d refused of %d", admitted, refused, flood)
			}
			if !failOpen && (admitted != capKeys-1 || refused != flood-capKeys+1) {
				t.Fatalf("deny: %d admitted, %d refused of %d", admitted, refused, flood)
			}
			var after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&after)
			grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			t.Logf("a flood of %d keys under a cap of %d grew the heap by %d MB", flood, capKeys, grown>>20)
			if limit := int64(capKeys * 600); grown > limit {
				t.Fatalf("the heap grew by %d bytes, more than %d for %d keys", grown, limit, capKeys)
			}
			// The key that was there first is still limited: 5 an hour,
			// one used, four more, then denied.
			for i := range 5 {
				r := apply(t0+int64(time.Second), []Request{one("existing", hourly, 1)})[0]
				if r.Allowed != (i < 4) {
					t.Fatalf("the existing key's request %d: %+v", i, r)
				}
			}
			runtime.KeepAlive(f)
		})
	}
}
