package grpcapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/ratelimitheader"
	"github.com/limitnode/limitnode/rls"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
)

// rateLimitService answers ShouldRateLimit.
type rateLimitService struct {
	ratelimitv3.UnimplementedRateLimitServiceServer
	server *Server
}

// ShouldRateLimit decides every descriptor of the request at once.
func (r *rateLimitService) ShouldRateLimit(ctx context.Context, req *ratelimitv3.RateLimitRequest) (*ratelimitv3.RateLimitResponse, error) {
	s := r.server
	defer func(start time.Time) { s.metrics.duration.Observe(time.Since(start).Seconds()) }(time.Now())
	q, err := queryOf(req)
	if err != nil {
		s.metrics.answered("invalid")
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
	defer cancel()
	d, err := s.limiter.ShouldRateLimit(ctx, q)
	if err != nil {
		st := statusOf(err)
		s.metrics.answered(st.Code().String())
		if st.Code() == codes.Internal {
			s.opts.Logger.Error("grpc: ShouldRateLimit failed", "domain", q.Domain, "err", err)
		}
		return nil, st.Err()
	}
	// As the HTTP API's X-Limitnode-Decided-At and X-Limitnode-Leader:
	// for tests and debugging; Envoy ignores them.
	md := metadata.Pairs("x-limitnode-decided-at", strconv.FormatInt(d.AtNanos, 10), "x-limitnode-leader", d.Leader)
	if d.Leased {
		md.Set("x-limitnode-leased", "true")
	}
	if d.Shared {
		md.Set("x-limitnode-shared", "true")
	}
	if d.Blocked != nil {
		// A block denied it: its reason, for whoever reads the call.
		md.Set("x-limitnode-blocked", ratelimitheader.Printable(cmp.Or(d.Blocked.Reason, "blocked")))
	}
	if h := deniedByHeader(d); h != "" {
		md.Set("x-limitnode-denied-by", h)
	}
	_ = grpc.SetHeader(ctx, md)
	resp := responseOf(d, s.opts.Jitter)
	s.metrics.answered(resp.OverallCode.String())
	s.metrics.descriptors(q, d)
	return resp, nil
}

// queryOf turns Envoy's request into a query: a descriptor's hits are its
// own hits_addend when set (0 checks without consuming), else the
// request's, where 0 (unset in proto3) means 1, as in envoyproxy/ratelimit.
func queryOf(req *ratelimitv3.RateLimitRequest) (rls.Query, error) {
	q := rls.Query{Domain: req.GetDomain(), Descriptors: make([]rls.QueryDescriptor, len(req.GetDescriptors()))}
	if len(q.Descriptors) > rls.MaxQueryDescriptors {
		return rls.Query{}, contract.Invalid("descriptors", "descriptors must hold 1 to %d descriptors", rls.MaxQueryDescriptors)
	}
	hits := int64(max(req.GetHitsAddend(), 1))
	for i, pd := range req.GetDescriptors() {
		field := fmt.Sprintf("descriptors[%d]", i)
		if pd.GetIsNegativeHits() {
			return rls.Query{}, contract.Invalid(field+".is_negative_hits", "is_negative_hits is not supported: limitnode never gives hits back")
		}
		d := &q.Descriptors[i]
		d.Hits = hits
		if h := pd.GetHitsAddend(); h != nil {
			if h.GetValue() > uint64(rls.MaxHits) {
				return rls.Query{}, contract.Invalid(field+".hits_addend", "hits_addend must be from 0 to %d", int64(rls.MaxHits))
			}
			d.Hits = int64(h.GetValue())
		}
		if o := pd.GetLimit(); o != nil {
			if m := o.GetUnitMultiplier(); m != nil && m.GetValue() > 1 {
				return rls.Query{}, contract.Invalid(field+".limit.unit_multiplier", "unit_multiplier is not supported")
			}
			if o.GetUnit() == typev3.RateLimitUnit_UNKNOWN {
				return rls.Query{}, contract.Invalid(field+".limit.unit", "the limit override needs a unit")
			}
			d.Override = &rls.Override{RequestsPerUnit: o.GetRequestsPerUnit(), Unit: o.GetUnit().String()}
		}
		if len(pd.GetEntries()) > rls.MaxDepth {
			return rls.Query{}, contract.Invalid(field+".entries", "a descriptor holds 1 to %d entries", rls.MaxDepth)
		}
		d.Entries = make([]rls.Entry, len(pd.GetEntries()))
		for j, e := range pd.GetEntries() {
			d.Entries[j] = rls.Entry{Key: e.GetKey(), Value: e.GetValue()}
		}
	}
	if err := q.Validate(); err != nil {
		return rls.Query{}, err
	}
	return q, nil
}

// statusOf maps the cluster's errors to gRPC statuses. Envoy treats every
// error alike (its failure_mode_deny decides), but people reading logs
// and grpcurl output do not.
func statusOf(err error) *status.Status {
	if rej := contract.As(err); rej != nil {
		switch {
		case errors.Is(rej, contract.ErrNotFound):
			return status.New(codes.NotFound, rej.Error())
		case errors.Is(rej, contract.ErrResourceExhausted):
			return status.New(codes.ResourceExhausted, rej.Error())
		default:
			return status.New(codes.InvalidArgument, rej.Error())
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.New(codes.DeadlineExceeded, "no decision in time")
	case errors.Is(err, context.Canceled):
		return status.New(codes.Canceled, "the call was cancelled")
	case errors.Is(err, contract.ErrNoLeader), errors.Is(err, contract.ErrShutdown):
		return status.New(codes.Unavailable, err.Error())
	case errors.Is(err, contract.ErrOutcomeUnknown):
		return status.New(codes.Unavailable, "the outcome is unknown (the hits may have been counted): "+err.Error())
	default:
		return status.New(codes.Internal, err.Error())
	}
}

// responseOf builds Envoy's answer: OVER_LIMIT when a limit not in shadow
// mode denied; per descriptor, OVER_LIMIT for a limit that denied (a shadow
// limit's denial reads OK, as in envoyproxy/ratelimit), the limit, what
// remains and the time until it resets; an unlimited descriptor reads OK
// with the most remaining. The rate-limit headers (and Retry-After when
// denied) of the descriptor closest to its limit go in
// response_headers_to_add.
func responseOf(d rls.Decision, jitter func(int64) int64) *ratelimitv3.RateLimitResponse {
	resp := &ratelimitv3.RateLimitResponse{OverallCode: ratelimitv3.RateLimitResponse_OK,
		Statuses: make([]*ratelimitv3.RateLimitResponse_DescriptorStatus, len(d.Descriptors))}
	if !d.Allowed {
		resp.OverallCode = ratelimitv3.RateLimitResponse_OVER_LIMIT
	}
	closest := -1
	for i := range d.Descriptors {
		dd := &d.Descriptors[i]
		st := &ratelimitv3.RateLimitResponse_DescriptorStatus{Code: ratelimitv3.RateLimitResponse_OK}
		resp.Statuses[i] = st
		switch {
		case dd.Unlimited:
			st.LimitRemaining = math.MaxUint32
			continue
		case !dd.Limited:
			continue
		}
		dec := &dd.Decision
		if !dec.Allowed && !dd.Shadow {
			st.Code = ratelimitv3.RateLimitResponse_OVER_LIMIT
		}
		st.CurrentLimit = &ratelimitv3.RateLimitResponse_RateLimit{Name: dd.Name, RequestsPerUnit: dd.RequestsPerUnit, Unit: ratelimitv3.RateLimitResponse_RateLimit_Unit(ratelimitv3.RateLimitResponse_RateLimit_Unit_value[dd.Unit])}
		st.LimitRemaining = uint32(min(max(dec.Remaining, 0), math.MaxUint32))
		reset := untilReset(dd, d.AtNanos)
		if b := d.Blocked; b != nil && b.Check == i {
			reset = max(reset, b.UntilNanos-d.AtNanos) // the limit is not available before the block ends
		}
		st.DurationUntilReset = durationpb.New(time.Duration(reset))
		if !dd.Shadow && (closest < 0 || closer(dd, &d.Descriptors[closest])) {
			closest = i
		}
	}
	if closest >= 0 {
		resp.ResponseHeadersToAdd = headersOf(&d.Descriptors[closest], jitter)
	}
	if h := deniedByHeader(d); h != "" {
		resp.ResponseHeadersToAdd = append(resp.ResponseHeadersToAdd, &corev3.HeaderValue{Key: ratelimitheader.DeniedByName, Value: h})
		resp.DynamicMetadata = deniedByMetadata(d)
	}
	return resp
}

// deniedByHeader is Limitnode-Denied-By of a denial, as the HTTP API
// writes it, the index that of the descriptor; "" when d says nothing of
// what denied it.
func deniedByHeader(d rls.Decision) string {
	by := d.DeniedBy
	if by == nil || d.Allowed {
		return ""
	}
	denial := ratelimitheader.Denial{Policy: by.Policy, Index: by.Check, Param: "descriptor", Version: by.PolicyVersion, Cause: by.Cause, Limit: by.Limit}
	if d.Blocked != nil {
		denial.Reason = d.Blocked.Reason
	}
	return ratelimitheader.DeniedBy(denial)
}

// deniedByMetadata is what denied the request as Envoy's dynamic metadata
// (the ratelimit filter's namespace; access logs read it as
// %DYNAMIC_METADATA(envoy.filters.http.ratelimit:denied_by)%): the
// descriptor, its limit's name, the domain and its version, the cause and
// the limit.
func deniedByMetadata(d rls.Decision) *structpb.Struct {
	by := d.DeniedBy
	fields := map[string]any{
		"descriptor": by.Check, "policy": by.Policy, "policy_version": float64(by.PolicyVersion), "cause": by.Cause,
		"algorithm": by.Limit.Algorithm.String(), "rate": float64(by.Limit.Rate), "period_ms": float64(int64(by.Limit.Period) / int64(time.Millisecond)),
	}
	if by.Check < len(d.Descriptors) && d.Descriptors[by.Check].Name != "" {
		fields["name"] = d.Descriptors[by.Check].Name
	}
	if d.Blocked != nil {
		fields["reason"] = d.Blocked.Reason
	}
	s, err := structpb.NewStruct(map[string]any{"denied_by": fields})
	if err != nil { // only for values structpb cannot hold, which these are not
		return nil
	}
	return s
}

// untilReset is the time until a descriptor's limit resets: for the
// windows, the end of the current window (what envoyproxy/ratelimit
// reports, whether or not the window holds hits; a sliding counter's
// previous window weighs less from then on, and it is never more than the
// unit Envoy was told); for the others, until the limit is fully
// available.
func untilReset(dd *rls.DescriptorDecision, atNanos int64) int64 {
	if (dd.Algorithm == algorithms.FixedWindow || dd.Algorithm == algorithms.SlidingWindowCounter) && dd.Period > 0 {
		return int64(dd.Period) - atNanos%int64(dd.Period)
	}
	return int64(dd.Decision.ResetAfter)
}

// closer reports whether a is closer to its limit than b: denied before
// allowed, then less remaining.
func closer(a, b *rls.DescriptorDecision) bool {
	if a.Decision.Allowed != b.Decision.Allowed {
		return !a.Decision.Allowed
	}
	return a.Decision.Remaining < b.Decision.Remaining
}

// headersOf returns the rate-limit headers of one descriptor's decision,
// the HTTP API's spelling (package ratelimitheader), with Retry-After when
// it denied.
func headersOf(dd *rls.DescriptorDecision, jitter func(int64) int64) []*corev3.HeaderValue {
	fields := ratelimitheader.Fields(cmp.Or(dd.Name, dd.Path), dd.Decision, dd.Rate, int64(dd.Period))
	out := make([]*corev3.HeaderValue, 0, len(fields)+1)
	for _, f := range fields {
		out = append(out, &corev3.HeaderValue{Key: f.Name, Value: f.Value})
	}
	if !dd.Decision.Allowed {
		retry := ratelimitheader.RetryAfter(ratelimitheader.CeilDiv(int64(dd.Decision.RetryAfter), int64(time.Millisecond)), jitter)
		out = append(out, &corev3.HeaderValue{Key: "Retry-After", Value: retry})
	}
	return out
}
