package fsm

import (
	"errors"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
)

func TestDecodeRequest(t *testing.T) {
	t.Parallel()
	encode := func(ct CommandType, body any) []byte {
		data, err := Encode(ct, body)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	minute := algorithms.Limit{Rate: 10, Period: time.Minute, Burst: 10}
	tests := []struct {
		name      string
		data      []byte
		wantField string // a refusal of this field
		corrupt   bool   // an ErrCorruptCommand
		stamped   bool
	}{
		{"a policy", encode(CommandPutPolicy, &contract.Policy{Name: "p", Limit: minute}), "", false, false},
		{"a policy of rate 0", encode(CommandPutPolicy, &contract.Policy{Name: "p", Limit: algorithms.Limit{Period: time.Second}}), "limit.rate", false, false},
		{"a deletion of a bad policy name", encode(CommandDeletePolicy, &NamedDeleteCommand{Name: "a/b"}), "name", false, false},
		{"an acquire", encode(CommandAcquireLease, &LeaseCommand{ID: "0123456789abcdef", Key: "k", Max: 1, TTLNanos: int64(time.Minute)}), "", false, true},
		{"an acquire without a key", encode(CommandAcquireLease, &LeaseCommand{ID: "0123456789abcdef", Max: 1, TTLNanos: int64(time.Minute)}), "key", false, true},
		{"a renewal of no ID", encode(CommandRenewLease, &LeaseCommand{TTLNanos: int64(time.Minute)}), "id", false, true},
		{"an audited policy", func() []byte {
			d, _ := EncodeAudited("ops", CommandPutPolicy, &contract.Policy{Name: "p", Limit: minute})
			return d
		}(), "", false, true},
		{"an audited policy of rate 0", func() []byte {
			d, _ := EncodeAudited("ops", CommandPutPolicy, &contract.Policy{Name: "p", Limit: algorithms.Limit{Period: time.Second}})
			return d
		}(), "limit.rate", false, true},
		{"an audited acquire, which no operator sends", func() []byte {
			d, _ := EncodeAudited("ops", CommandAcquireLease, &LeaseCommand{ID: "0123456789abcdef", Key: "k", Max: 1, TTLNanos: int64(time.Minute)})
			return d
		}(), "", true, false},
		{"an audit record, which only the leader writes", encode(CommandAudit, &AuditCommand{Action: "restore"}), "", true, false},
		{"an allow batch, which only the leader writes", encode(CommandAllow, &AllowCommand{}), "", true, false},
		{"a checkpoint, which only the leader writes", encode(CommandCheckpoint, &CheckpointCommand{}), "", true, false},
		{"a damaged entry", func() []byte {
			d := encode(CommandPutPolicy, &contract.Policy{Name: "p", Limit: minute})
			d[len(d)-1] ^= 1
			return d
		}(), "", true, false},
		{"trailing bytes", append(encode(CommandDeletePolicy, &NamedDeleteCommand{Name: "p"})[5:], 0), "", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req, err := DecodeRequest(tt.data)
			switch rej := contract.As(err); {
			case tt.corrupt:
				if !errors.Is(err, ErrCorruptCommand) {
					t.Fatalf("err = %v, want ErrCorruptCommand", err)
				}
			case tt.wantField != "":
				if rej == nil || rej.Field != tt.wantField {
					t.Fatalf("err = %v, want a refusal of %s", err, tt.wantField)
				}
			case err != nil:
				t.Fatalf("err = %v", err)
			default:
				if req.Stamped() != tt.stamped {
					t.Fatalf("Stamped() = %v, want %v", req.Stamped(), tt.stamped)
				}
				req.Stamp(42)
				again, err := req.Encode()
				if err != nil {
					t.Fatal(err)
				}
				back, err := DecodeRequest(again)
				if err != nil {
					t.Fatalf("the re-encoded command: %v", err)
				}
				stamp := int64(-1)
				switch {
				case back.audited != nil:
					stamp = back.audited.NowNanos
				case back.rule.stamp != nil:
					stamp = back.body.(*LeaseCommand).NowNanos
				}
				if tt.stamped && stamp != 42 {
					t.Fatalf("the stamp did not reach the command: %+v", back)
				}
			}
		})
	}
}
