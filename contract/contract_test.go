package contract

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
)

var perMinute = algorithms.Limit{Rate: 10, Period: time.Minute, Burst: 10}

func ptr[T any](v T) *T { return &v }

func TestLimitSpecAppliesDefaultsAndNamesTheField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		spec      LimitSpec
		want      algorithms.Limit
		wantField string
	}{
		{"rate alone is a token bucket of a second, burst = rate", LimitSpec{Rate: ptr[int64](5)}, algorithms.Limit{Rate: 5, Period: time.Second, Burst: 5}, ""},
		{"a window takes no burst by default", LimitSpec{Algorithm: "fixed_window", Rate: ptr[int64](5), Period: ptr("1m")}, algorithms.Limit{Algorithm: algorithms.FixedWindow, Rate: 5, Period: time.Minute}, ""},
		{"a missing rate", LimitSpec{}, algorithms.Limit{}, "rate"},
		{"an unknown algorithm", LimitSpec{Algorithm: "nope", Rate: ptr[int64](1)}, algorithms.Limit{}, "algorithm"},
		{"a period that is no duration", LimitSpec{Rate: ptr[int64](1), Period: ptr("soon")}, algorithms.Limit{}, "period"},
		{"burst on a window", LimitSpec{Algorithm: "sliding_window_log", Rate: ptr[int64](1), Burst: ptr[int64](2)}, algorithms.Limit{}, "burst"},
		{"a rate out of range", LimitSpec{Rate: ptr[int64](0)}, algorithms.Limit{}, "rate"},
		{"a bucket that refills too slowly", LimitSpec{Rate: ptr[int64](1), Period: ptr("8760h"), Burst: ptr[int64](100)}, algorithms.Limit{}, "burst"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.spec.Limit()
			if tt.wantField == "" {
				if err != nil || got != tt.want {
					t.Fatalf("Limit() = %+v, %v; want %+v", got, err, tt.want)
				}
				if back, err := SpecOf(got).Limit(); err != nil || back != got {
					t.Fatalf("SpecOf does not give the limit back: %+v, %v", back, err)
				}
				return
			}
			if err == nil || err.Field != tt.wantField || err.Code != CodeInvalidArgument || strings.HasPrefix(err.Message, tt.wantField+":") {
				t.Fatalf("Limit() error %#v, want one on %q whose message does not repeat the field", err, tt.wantField)
			}
		})
	}
}

func TestRequestValidateNamesTheCheckAtFault(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		req       Request
		wantField string
	}{
		{"a valid inline check", Request{Checks: []Check{{Key: "k", Limit: perMinute, Cost: 1}}}, ""},
		{"a valid policy check with dimensions", Request{Checks: []Check{{Policy: "p", Dimensions: []Dimension{{Name: "user", Value: "u"}}, Cost: 1}}}, ""},
		{"no checks", Request{}, "checks"},
		{"too many checks", Request{Checks: make([]Check, MaxChecks+1)}, "checks"},
		{"a long request ID", Request{RequestID: strings.Repeat("r", MaxRequestIDBytes+1), Checks: []Check{{Key: "k", Limit: perMinute}}}, "request_id"},
		{"a missing key", Request{Checks: []Check{{Limit: perMinute}}}, "checks[0].key"},
		{"a key too long", Request{Checks: []Check{{Key: strings.Repeat("k", MaxKeyBytes+1), Limit: perMinute}}}, "checks[0].key"},
		{"a negative cost", Request{Checks: []Check{{Key: "k", Limit: perMinute, Cost: -1}}}, "checks[0].cost"},
		{"a cost over the capacity", Request{Checks: []Check{{Key: "k", Limit: perMinute, Cost: 11}}}, "checks[0].cost"},
		{"a bad limit in the second check", Request{Checks: []Check{{Key: "a", Limit: perMinute}, {Key: "b"}}}, "checks[1].limit.rate"},
		{"the same key and limit twice", Request{Checks: []Check{{Key: "a", Limit: perMinute}, {Key: "a", Limit: perMinute}}}, "checks[1].key"},
		{"a limit and a policy", Request{Checks: []Check{{Key: "a", Limit: perMinute, Policy: "p"}}}, "checks[0].limit"},
		{"a bad policy name", Request{Checks: []Check{{Key: "a", Policy: "has space"}}}, "checks[0].policy"},
		{"a key and dimensions", Request{Checks: []Check{{Key: "a", Policy: "p", Dimensions: []Dimension{{Name: "u", Value: "v"}}}}}, "checks[0].dimensions"},
		{"a dimension twice", Request{Checks: []Check{{Policy: "p", Dimensions: []Dimension{{Name: "u", Value: "v"}, {Name: "u", Value: "w"}}}}}, "checks[0].dimensions"},
		{"dimensions without a policy", Request{Checks: []Check{{Key: "a", Limit: perMinute, Dimensions: []Dimension{{Name: "u", Value: "v"}}}}}, "checks[0].dimensions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.req.Validate()
			switch {
			case tt.wantField == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.wantField != "" && (err == nil || err.Field != tt.wantField):
				t.Fatalf("Validate = %#v, want an error on %q", err, tt.wantField)
			case err != nil && !errors.Is(err, ErrInvalid):
				t.Fatalf("%v is not ErrInvalid", err)
			}
		})
	}
}

func TestPolicyValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		policy    Policy
		wantField string
	}{
		{"a plain policy", Policy{Name: "api", Limit: perMinute}, ""},
		{"overrides in any order, normalized", Policy{Name: "api", Limit: perMinute, Overrides: []Override{{Key: "b", Limit: perMinute}, {Key: "a", Limit: perMinute}}}, ""},
		{"a bad name", Policy{Name: "a b", Limit: perMinute}, "name"},
		{"a bad limit", Policy{Name: "api"}, "limit.rate"},
		{"an override key twice", Policy{Name: "api", Limit: perMinute, Overrides: []Override{{Key: "a", Limit: perMinute}, {Key: "a", Limit: perMinute}}}, "overrides"},
		{"a bad override", Policy{Name: "api", Limit: perMinute, Overrides: []Override{{Key: "a.b", Limit: algorithms.Limit{Rate: 1}}}}, `overrides["a.b"].period`},
		{"a template without a placeholder", Policy{Name: "api", Limit: perMinute, KeyTemplate: "fixed"}, "key_template"},
		{"a placeholder twice", Policy{Name: "api", Limit: perMinute, KeyTemplate: "{a}:{a}"}, "key_template"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := tt.policy
			p.Normalize()
			err := p.Validate()
			if (tt.wantField == "") != (err == nil) || (err != nil && err.Field != tt.wantField) {
				t.Fatalf("Validate = %#v, want field %q", err, tt.wantField)
			}
		})
	}
}

func TestRenderKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		template    string
		dims        []Dimension
		want        string
		wantInError string
	}{
		{"in the template's order, whatever the dimensions' order", "{tenant}:{route}", []Dimension{{Name: "route", Value: "/x"}, {Name: "tenant", Value: "t-7"}}, "t-7:/x", ""},
		{"a missing dimension is named", "{tenant}:{route}", []Dimension{{Name: "tenant", Value: "t"}}, "", "missing dimensions for the key template \"{tenant}:{route}\": route"},
		{"an unknown dimension is named", "{tenant}", []Dimension{{Name: "tenant", Value: "t"}, {Name: "zone", Value: "z"}}, "", "not in the key template \"{tenant}\": zone"},
		{"an empty key is refused", "{tenant}", []Dimension{{Name: "tenant", Value: ""}}, "", "1 to 512 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := RenderKey(tt.template, tt.dims)
			if tt.wantInError == "" {
				if err != nil || got != tt.want {
					t.Fatalf("RenderKey = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if err == nil || err.Field != "dimensions" || !strings.Contains(err.Message, tt.wantInError) {
				t.Fatalf("RenderKey error %v, want one on dimensions mentioning %q", err, tt.wantInError)
			}
		})
	}
}

func TestErrorsMatchTheirSentinel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  *Error
		want error
	}{
		{Invalid("f", "bad"), ErrInvalid},
		{NotFound("f", "gone"), ErrNotFound},
		{Exhausted("full"), ErrResourceExhausted},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%v does not match %v", tt.err, tt.want)
		}
	}
	if got := Invalid("rate", "x").Within("checks[1]").Within("requests[2]").Field; got != "requests[2].checks[1].rate" {
		t.Errorf("Within: %q", got)
	}
	if got := Invalid("", "x").Within("requests[0]").Field; got != "requests[0]" {
		t.Errorf("Within an error on no field: %q", got)
	}
}

func TestLeaseAndMemberValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		validate  func() *Error
		wantField string
	}{
		{"a good lease", func() *Error { return (&LeaseRequest{Key: "k", Max: 5, TTL: time.Minute}).Validate() }, ""},
		{"a lease without a key", func() *Error { return (&LeaseRequest{Max: 5, TTL: time.Minute}).Validate() }, "key"},
		{"a lease of max 0", func() *Error { return (&LeaseRequest{Key: "k", TTL: time.Minute}).Validate() }, "max"},
		{"a lease of 25 hours", func() *Error { return (&LeaseRequest{Key: "k", Max: 1, TTL: 25 * time.Hour}).Validate() }, "ttl"},
		{"a lease ID with a slash", func() *Error { return ValidateLeaseID("a/b") }, "id"},
		{"a good member", func() *Error { return (&Member{ID: "n4", RaftAddr: "10.0.0.4:7071"}).Validate() }, ""},
		{"a member without an ID", func() *Error { return (&Member{RaftAddr: "10.0.0.4:7071"}).Validate() }, "id"},
		{"a member whose Raft address has no port", func() *Error { return (&Member{ID: "n4", RaftAddr: "10.0.0.4"}).Validate() }, "raft_addr"},
	}
	for _, tt := range tests {
		err := tt.validate()
		if (tt.wantField == "") != (err == nil) || (err != nil && err.Field != tt.wantField) {
			t.Errorf("%s: %#v, want field %q", tt.name, err, tt.wantField)
		}
	}
}
