// Package client is a Go client for limitnode's HTTP API (docs/http-api.md):
// decisions (Allow, Wait, batches through Options.Coalesce), leases
// (AcquireLease, WithLease), policies, Envoy rate limit service domains,
// membership, backups and health, against one or more node addresses,
// trying the next address when one cannot be reached or, for a call that
// may be sent again, does not answer within its attempt's time
// (attempts.go). Every node answers every endpoint, so any address will do. Its bodies are package api/wire's,
// the same definitions the server uses.
//
// Guard wraps a Client with an explicit behaviour for when the limiter
// cannot decide: fail closed, fail open, or decide with a local in-process
// limiter that enforces this replica's share of the limit.
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/limitnode/limitnode/api/wire"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/ratelimitheader"
)

// Client calls limitnode nodes over HTTP.
type Client struct {
	addrs []string
	http  *http.Client
	token string
	// perAttempt is Options.AttemptTimeout.
	perAttempt time.Duration
	// preferred is the index of the address that answered last, tried
	// first (attempts.go).
	preferred atomic.Int32
	// coalesce, when set, gathers concurrent Allow calls (coalesce.go).
	coalesce *coalescer
	// shares, when set, are the shares of hot keys' budgets the client
	// answers from (shares.go).
	shares *clientShares
}

// Options configures a Client beyond its addresses.
type Options struct {
	// HTTPClient makes the calls. Nil means one with a 10s timeout that
	// follows no redirect (and TLS, when set).
	HTTPClient *http.Client
	// TLS, when set, is used for https:// addresses (the CA to trust, a
	// client certificate), and addresses given without a scheme are
	// https://. It is ignored when HTTPClient is set.
	TLS *tls.Config
	// Token, when set, is sent with every call as Authorization: Bearer.
	Token string
	// AttemptTimeout bounds one attempt of a decision or a read that
	// another address could answer, so that a node that hangs costs this
	// much of the call, then the next address is tried (attempts.go). 0 means a third of what the call has: the time its context
	// leaves it, or else HTTPClient's Timeout. A request with Hold gets its
	// wait on top.
	AttemptTimeout time.Duration
	// Coalesce, when true, sends concurrent Allow calls together: a call
	// that finds none in flight goes at once; those that arrive while one
	// is in flight wait for it, then go as one POST /v1/allow/batch (up to
	// 1,000 requests and 4,096 checks), each caller getting its own
	// decision. A Decision that came in a batch has RateLimit-Limit,
	// RateLimit-Remaining, RateLimit-Reset and, when denied, Retry-After
	// in Header, computed from its fields (a batch answers no per-request
	// headers), and no Leader.
	Coalesce bool
	// LocalShares, when true, lets the client answer a hot key in process:
	// with a request of one check (a policy's, or an inline Limit with
	// LocalShares) and no RequestID, MaxWait or Hold, it takes a share of
	// the key's budget from the cluster and admits the key's next requests
	// from it until it is spent or ends, asking for the next one before.
	// The cluster keeps it exact: what every client and node admit
	// together never exceeds the limit. Such a Decision has Shared set; its
	// Remaining is what the key had left for others when the share was
	// granted plus what the client holds. Close gives back what is left.
	LocalShares bool
}

// New returns a client for the nodes at addrs ("127.0.0.1:7070" or a full
// "http://..." base URL). A nil httpClient means one with a 10s timeout.
func New(httpClient *http.Client, addrs ...string) *Client {
	return NewWithOptions(Options{HTTPClient: httpClient}, addrs...)
}

// NewWithOptions returns a client for the nodes at addrs ("127.0.0.1:7070",
// or a full "https://..." base URL) configured by opts.
func NewWithOptions(opts Options, addrs ...string) *Client {
	httpClient, scheme := opts.HTTPClient, "http://"
	if opts.TLS != nil {
		scheme = "https://"
	}
	if httpClient == nil {
		transport := http.DefaultTransport.(*http.Transport).Clone()
		if opts.TLS != nil {
			// A copy: the transport adds its protocols (h2) to the config
			// it is given, which must not leak into the caller's.
			transport.TLSClientConfig = opts.TLS.Clone()
		}
		// A node never redirects a call the client makes through this
		// client: a redirect is an answer, not a place to send the call.
		httpClient = &http.Client{Timeout: 10 * time.Second, Transport: transport,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	c := &Client{http: httpClient, token: opts.Token, perAttempt: opts.AttemptTimeout}
	if opts.LocalShares {
		c.shares = c.newClientShares()
	}
	if opts.Coalesce {
		c.coalesce = &coalescer{c: c}
	}
	for _, a := range addrs {
		if !strings.HasPrefix(a, "http://") && !strings.HasPrefix(a, "https://") {
			a = scheme + a
		}
		c.addrs = append(c.addrs, a)
	}
	return c
}

// Limit is a limit: the algorithm (default token_bucket), the rate per
// period (default a second) and, for the bucket
// algorithms and GCRA, the burst (default the rate). A zero field is the
// default; the API's spelling is wire.Limit. LocalShares, on an inline
// limit of an allow request, lets the nodes decide the key from shares of
// its budget.
type Limit struct {
	Algorithm   string
	Rate        int64
	Period      time.Duration
	Burst       int64
	LocalShares *LocalShares
}

// LocalShares lets every node decide a key from shares of its budget,
// taken through the log and spent where requests arrive (wire.LocalShares
// spells it): each share lasts TTL (default 500ms) and
// holds at most MaxUnits (default an eighth of the limit's capacity). The
// zero value means the defaults.
type LocalShares struct {
	TTL      time.Duration
	MaxUnits int64
}

func (s *LocalShares) toWire() *wire.LocalShares {
	if s == nil {
		return nil
	}
	out := &wire.LocalShares{}
	if s.TTL != 0 {
		ttl := s.TTL.String()
		out.TTL = &ttl
	}
	if s.MaxUnits != 0 {
		out.MaxUnits = &s.MaxUnits
	}
	return out
}

func sharesFromWire(s *wire.LocalShares) (*LocalShares, error) {
	if s == nil {
		return nil, nil
	}
	out := &LocalShares{}
	if s.TTL != nil {
		ttl, err := time.ParseDuration(*s.TTL)
		if err != nil {
			return nil, fmt.Errorf("local_shares.ttl: %w", err)
		}
		out.TTL = ttl
	}
	if s.MaxUnits != nil {
		out.MaxUnits = *s.MaxUnits
	}
	return out, nil
}

// toWire spells l as the API does.
func (l *Limit) toWire() *wire.Limit {
	if l == nil {
		return nil
	}
	out := &wire.Limit{Algorithm: l.Algorithm, Rate: &l.Rate, LocalShares: l.LocalShares.toWire()}
	if l.Period != 0 {
		period := l.Period.String()
		out.Period = &period
	}
	if l.Burst != 0 {
		out.Burst = &l.Burst
	}
	return out
}

// limitFromWire is the Limit the API's l spells.
func limitFromWire(l *wire.Limit) (*Limit, error) {
	if l == nil {
		return nil, nil
	}
	shares, err := sharesFromWire(l.LocalShares)
	if err != nil {
		return nil, err
	}
	out := &Limit{Algorithm: l.Algorithm, LocalShares: shares}
	if l.Rate != nil {
		out.Rate = *l.Rate
	}
	if l.Period != nil {
		if out.Period, err = time.ParseDuration(*l.Period); err != nil {
			return nil, fmt.Errorf("period: %w", err)
		}
	}
	if l.Burst != nil {
		out.Burst = *l.Burst
	}
	return out, nil
}

// Check is one check of a multi-check request: Key and Limit, or Policy
// (with Dimensions when its key is a template), and Cost (0: 1), or Peek
// to look at what the key has left without consuming (Cost then 0: a peek
// with a cost is refused before it is sent).
type Check struct {
	Key        string
	Limit      *Limit
	Policy     string
	Dimensions map[string]string
	Cost       int64
	Peek       bool
}

// wireCost spells a check's cost as the API does: absent for the default
// of 1, 0 for a peek.
func wireCost(cost int64, peek bool) *int64 {
	switch {
	case peek:
		return &cost
	case cost == 0:
		return nil
	}
	return &cost
}

func (c *Check) toWire() wire.Check {
	out := wire.Check{Key: c.Key, Limit: c.Limit.toWire(), Cost: wireCost(c.Cost, c.Peek), Dimensions: c.Dimensions}
	if c.Policy != "" {
		out.Policy = &c.Policy
	}
	return out
}

// AllowRequest is a request for a decision: Key and Limit or Policy (and
// Cost, 0 meaning 1, or Peek, as in Check), or Checks, decided together.
type AllowRequest struct {
	Key        string
	Limit      *Limit
	Policy     string
	Dimensions map[string]string
	Cost       int64
	Peek       bool
	RequestID  string
	Checks     []Check
	// MaxWait, for the bucket algorithms, admits the request now as a
	// reservation when it would be admitted within it; Decision.Wait
	// then says how long to wait before going on (see Wait). Hold makes
	// the node wait it out before answering.
	MaxWait time.Duration
	Hold    bool
	// SettleTTL, when not 0, charges an admission its cost up front, to
	// settle within it with what the request used (see StartSettlement).
	SettleTTL time.Duration
}

// validatePeeks refuses a peek with a cost (contract.ValidatePeek), on
// the request or one of its checks: the API's JSON spells a peek as cost
// 0, so the cost would be sent, and consumed.
func (r *AllowRequest) validatePeeks() error {
	if err := contract.ValidatePeek(r.Peek, r.Cost); err != nil {
		return invalidRequest(err, true)
	}
	for i := range r.Checks {
		if err := contract.ValidatePeek(r.Checks[i].Peek, r.Checks[i].Cost); err != nil {
			return invalidRequest(err.Within(fmt.Sprintf("checks[%d]", i)), false)
		}
	}
	return nil
}

// toWire spells r as the API does.
func (r *AllowRequest) toWire() wire.AllowRequest {
	single := Check{Key: r.Key, Limit: r.Limit, Policy: r.Policy, Dimensions: r.Dimensions, Cost: r.Cost, Peek: r.Peek}
	c := single.toWire()
	out := wire.AllowRequest{Key: c.Key, Limit: c.Limit, Cost: c.Cost, Policy: c.Policy, Dimensions: c.Dimensions, RequestID: r.RequestID, Hold: r.Hold}
	for i := range r.Checks {
		out.Checks = append(out.Checks, r.Checks[i].toWire())
	}
	if r.MaxWait != 0 {
		maxWait := r.MaxWait.String()
		out.MaxWait = &maxWait
	}
	if r.SettleTTL != 0 {
		ttl := r.SettleTTL.String()
		out.Settle = &wire.SettleOptions{TTL: &ttl}
	}
	return out
}

// Decision is a /v1/allow answer: its body (wire.AllowResponse, its
// milliseconds as durations), with the headers a client acts on. It
// spells itself in JSON as the body.
type Decision struct {
	// Allowed is true when every check allowed and all consumed.
	Allowed bool
	// Limit and Remaining are the headline check's capacity and what it
	// has left (for several checks, the most restrictive).
	Limit, Remaining int64
	// ResetAfter is the time until the limit is fully available again
	// (reset_after_ms).
	ResetAfter time.Duration
	// ExactRetryAfter, for a denial, is the time until the same request
	// could be admitted (retry_after_ms), without RetryAfter's jitter.
	ExactRetryAfter time.Duration
	// Wait, for a request admitted by reservation (MaxWait), is how long
	// the caller must wait before going on (wait_ms); Held, with Hold, how
	// long the node waited it out instead (held_ms).
	Wait, Held time.Duration
	// Duplicate is true when the request ID was seen before: the answer is
	// the first decision, and nothing was consumed now.
	Duplicate bool
	// Checks reports each check, when a request has several or one of
	// them is a policy in shadow mode.
	Checks []CheckDecision
	// Blocked, for a request denied because a key is blocked, says so and
	// why; DeniedBy, for a denial, what denied it.
	Blocked  *Blocked
	DeniedBy *DeniedBy
	// SettlementID, for an admission with SettleTTL, names the open
	// settlement to settle.
	SettlementID string
	// Share is the share granted to a share ask, if any.
	Share *Share
	// StatusCode is 200 or 429.
	StatusCode int
	// RetryAfter is the 429's Retry-After header (with jitter), at most
	// MaxRetryAfter, or 0.
	RetryAfter time.Duration
	// Leader is the X-Limitnode-Leader header: the ID of the leader that
	// decided, or "" if the node did not say.
	Leader string
	// Header holds the answer's rate-limit headers as sent (RateLimit-*,
	// RateLimit, Retry-After; see RateLimitHeaders), under their canonical
	// names, for a middleware that passes them on; nil in a decision no
	// node sent (a Guard's fallback).
	Header http.Header
	// Shared is true for an admission the client answered from a share it
	// holds (Options.LocalShares), without asking the cluster.
	Shared bool
	// ResetAt is ResetAfter as a time on this process's clock: when the
	// answer arrived plus ResetAfter, when the limit is fully available
	// again.
	ResetAt time.Time
}

// CheckDecision is one check's part of a Decision (wire.CheckResponse).
type CheckDecision struct {
	Key              string
	Policy           string
	Shadow           bool
	Allowed          bool
	Limit, Remaining int64
	ResetAfter       time.Duration
	ExactRetryAfter  time.Duration
}

// Blocked, in a denial, says that a block denied the request
// (wire.Blocked): on which key (empty in answers a proxy may copy to its
// client), why, the policy whose penalty imposed it if one did, and how long
// it has left.
type Blocked struct {
	Key, Reason, Penalty string
	EndsIn               time.Duration
}

// DeniedBy, in a denial, says what denied it (wire.DeniedBy): the check
// (its index), the policy it was decided under ("" for an inline limit)
// and that policy's version, the limit that applied, and the cause:
// "limit", "block" or "penalty".
type DeniedBy struct {
	Check         int
	Policy        string
	PolicyVersion uint64
	Limit         Limit
	Cause         string
}

// Share is a share granted to the client (wire.Share): ID names it, Units
// may be spent for SpendFor after the request was sent, and Remaining is
// what the key had left for everyone else.
type Share struct {
	ID        string
	Units     int64
	SpendFor  time.Duration
	Remaining int64
}

// RateLimitHeaders are the headers of a /v1/allow answer that tell a caller
// its limit: what Decision.Header keeps.
var RateLimitHeaders = ratelimitheader.Names

// Error is an error answer of the API: its status and body (wire.Error).
type Error struct {
	StatusCode int
	Message    string
	Code       string
	Field      string
}

// errorOf is the error of an answer with status and body e.
func errorOf(status int, e wire.Error) *Error {
	return &Error{StatusCode: status, Message: e.Message, Code: e.Code, Field: e.Field}
}

// Error describes the API's answer: status, code, field and message.
func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("limitnode: %d %s (%s): %s", e.StatusCode, e.Code, e.Field, e.Message)
	}
	return fmt.Sprintf("limitnode: %d %s: %s", e.StatusCode, e.Code, e.Message)
}

// ErrOutcomeUnknown is what an *Error of a 503 whose request may or may
// not have been decided is (errors.Is): retry it with the same RequestID to
// be charged once, not afresh.
var ErrOutcomeUnknown = errors.New("limitnode: the outcome is unknown")

// Is reports whether e is target: ErrOutcomeUnknown for the API's
// outcome_unknown answer.
func (e *Error) Is(target error) bool {
	return target == ErrOutcomeUnknown && e.Code == "outcome_unknown"
}

// ErrUnreachable is returned when no address answered.
var ErrUnreachable = errors.New("limitnode: no node reachable")

// unreachable is ErrUnreachable with the last attempt's error, or, when
// there was none, why: the client was made without an address.
func unreachable(lastErr error) error {
	if lastErr == nil {
		return fmt.Errorf("%w: the client has no node address; give client.New or client.NewWithOptions at least one, such as 127.0.0.1:7070", ErrUnreachable)
	}
	return fmt.Errorf("%w: %w", ErrUnreachable, lastErr)
}

// Allow asks for a decision. A 429 is not an error: it is a Decision with
// Allowed false. Other 4xx and 5xx answers are *Error.
func (c *Client) Allow(ctx context.Context, req AllowRequest) (Decision, error) {
	if err := req.validatePeeks(); err != nil {
		return Decision{}, err
	}
	if c.shares != nil {
		if d, answered, err := c.allowShared(ctx, req); answered {
			return d, err
		}
	}
	if c.coalesce != nil {
		return c.coalesce.allow(ctx, req)
	}
	return c.allowOne(ctx, req)
}

// Wait asks for req with max_wait (replacing req.MaxWait) and, when it is
// admitted by reservation, sleeps the reservation's wait before returning,
// as x/time/rate's Wait does: on a nil error with Allowed true the caller
// may go on at once. A denial (more than maxWait away) returns at once.
// When ctx ends during the sleep, Wait returns ctx's error; the
// reservation stays consumed.
func (c *Client) Wait(ctx context.Context, req AllowRequest, maxWait time.Duration) (Decision, error) {
	req.MaxWait = maxWait
	d, err := c.Allow(ctx, req)
	if err != nil || !d.Allowed || d.Wait <= 0 {
		return d, err
	}
	timer := time.NewTimer(d.Wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		d.Wait = 0
		return d, nil
	case <-ctx.Done():
		return d, ctx.Err()
	}
}

// allowOne is one POST /v1/allow.
func (c *Client) allowOne(ctx context.Context, req AllowRequest) (Decision, error) {
	req = req.withRequestID()
	return c.allowWire(ctx, req.toWire())
}

// withRequestID is req with a request ID of its own when it reserves
// (MaxWait or SettleTTL) and has none, so that a call sent to a second node
// after the first did not answer is charged once. Such a request is
// answered through the log anyway; a plain one keeps no ID, so that a node
// may answer its denial from a deny lease.
func (req AllowRequest) withRequestID() AllowRequest {
	if req.RequestID == "" && (req.MaxWait != 0 || req.SettleTTL != 0) {
		req.RequestID = newRequestID()
	}
	return req
}

// newRequestID is a random request ID: 32 hex digits.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand's Read never fails
	return hex.EncodeToString(b[:])
}

// allowWire is one POST /v1/allow of the body in.
func (c *Client) allowWire(ctx context.Context, in wire.AllowRequest) (Decision, error) {
	a, err := c.call(ctx, callSpec{method: http.MethodPost, path: "/v1/allow", in: in,
		ok: []int{http.StatusOK, http.StatusTooManyRequests}, held: heldFor(in)})
	if err != nil {
		return Decision{}, err
	}
	return readDecision(a, time.Now())
}

// heldFor is how long a node may hold the answer to in on purpose: with
// hold, its max_wait, up to the node's bound.
func heldFor(in wire.AllowRequest) time.Duration {
	if !in.Hold || in.MaxWait == nil {
		return 0
	}
	wait, err := time.ParseDuration(*in.MaxWait)
	if err != nil || wait < 0 {
		return 0
	}
	return min(wait, maxHoldWait)
}

// maxHoldWait is the most a node holds a request with hold
// (httpapi.MaxHoldWait).
const maxHoldWait = 5 * time.Second

// Member is a cluster member: its ID, Raft address and HTTP address.
type Member = wire.Member

// MemberChange lifts checks that a change of members passes before it
// changes anything; the zero value keeps them all.
type MemberChange struct {
	// Replace lets a join evict a member with the same ID that still runs
	// at its recorded address.
	Replace bool
	// Force lets a change leave fewer answering voters than a quorum.
	Force bool
}

// Join asks the cluster to add m as a voter. It is refused, changing
// nothing, when m's Raft address does not answer as m.ID, when a member with
// m.ID still runs at another address, or when the change would leave fewer
// answering voters than a quorum; JoinWith lifts the last two checks.
func (c *Client) Join(ctx context.Context, m Member) error {
	return c.JoinWith(ctx, m, MemberChange{})
}

// JoinWith is Join with the checks that change lifts.
func (c *Client) JoinWith(ctx context.Context, m Member, change MemberChange) error {
	body := wire.JoinRequest{Member: m, Replace: change.Replace, Force: change.Force}
	_, err := c.do(ctx, http.MethodPost, "/v1/cluster/join", body, nil, http.StatusOK)
	return err
}

// ClusterNode is one node in a ClusterStatus (wire.Node), with what the
// leader last learnt of it (nil while unknown): whether it answered, how
// long before the view it last did (LastContact), its applied index and
// its lag. It spells itself in JSON as the API does.
type ClusterNode struct {
	Member
	Voter        bool
	Leader       bool
	Reachable    *bool
	LastContact  *time.Duration
	AppliedIndex *uint64
	Lag          *uint64
	DivergedAt   uint64
}

// MarshalJSON spells n as the API does (wire.Node).
func (n ClusterNode) MarshalJSON() ([]byte, error) {
	w := wire.Node{Member: n.Member, Voter: n.Voter, Leader: n.Leader, Reachable: n.Reachable, AppliedIndex: n.AppliedIndex,
		Lag: n.Lag, DivergedAt: n.DivergedAt}
	if n.LastContact != nil {
		ms := inMillis(*n.LastContact)
		w.LastContactMS = &ms
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads n as the API spells it.
func (n *ClusterNode) UnmarshalJSON(data []byte) error {
	var w wire.Node
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*n = ClusterNode{Member: w.Member, Voter: w.Voter, Leader: w.Leader, Reachable: w.Reachable, AppliedIndex: w.AppliedIndex,
		Lag: w.Lag, DivergedAt: w.DivergedAt}
	if w.LastContactMS != nil {
		contact := millis(*w.LastContactMS)
		n.LastContact = &contact
	}
	return nil
}

// ClusterStatus is the body of GET /v1/cluster (wire.Cluster): the
// answering node's ID and Raft address, its cluster's ID (empty while it
// knows none), the leader, Raft's term and indexes, and the members.
type ClusterStatus struct {
	Self         string        `json:"self"`
	SelfRaftAddr string        `json:"self_raft_addr"`
	ClusterID    string        `json:"cluster_id,omitempty"`
	Leader       string        `json:"leader"`
	Term         uint64        `json:"term"`
	CommitIndex  uint64        `json:"commit_index"`
	AppliedIndex uint64        `json:"applied_index"`
	Nodes        []ClusterNode `json:"nodes"`
}

// Cluster returns a node's view of the cluster.
func (c *Client) Cluster(ctx context.Context) (ClusterStatus, error) {
	var st ClusterStatus
	_, err := c.do(ctx, http.MethodGet, "/v1/cluster", nil, &st, http.StatusOK)
	return st, err
}

// do makes one call (call says how it goes from node to node); an answer
// with a status in ok is decoded into out, any other is an *Error. An
// answer that is JSON null, or not of out's types, is ErrMalformedAnswer.
func (c *Client) do(ctx context.Context, method, path string, in, out any, ok ...int) (*http.Response, error) {
	a, err := c.call(ctx, callSpec{method: method, path: path, in: in, ok: ok})
	if err != nil || out == nil {
		return a.resp, err
	}
	if err := decodeAnswer(a, out); err != nil {
		return nil, err
	}
	return a.resp, nil
}

// decodeAnswer decodes the body of a into out.
func decodeAnswer(a answered, out any) error {
	if bytes.Equal(bytes.TrimSpace(a.body), []byte("null")) {
		return fmt.Errorf("%w: %s answered null", ErrMalformedAnswer, a.resp.Request.URL.Host)
	}
	if err := json.Unmarshal(a.body, out); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrMalformedAnswer, a.resp.Request.URL.Host, err)
	}
	return nil
}
