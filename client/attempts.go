package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/limitnode/limitnode/api/wire"
)

// How a call goes from node to node. Each call makes one pass over the
// addresses, starting with the one that answered the client last. A
// request that provably never left (the connection could not be opened)
// goes to the next address at once. A request that reached a node which did
// not answer it (it hung past its attempt's time, or the connection broke)
// goes to the next address only when the call is resendable; any other call
// returns the error, its outcome unknown. A decision or a read that another
// address could answer is given a fraction of the call's time
// (attemptTimeout), so that a hung node costs that fraction, not the whole
// call; other calls may wait on the cluster on purpose (a change that gives
// capacity back waits out the deny leases, up to a second) and keep the
// whole call for each attempt.

// MaxAnswerBytes bounds the body of an answer the client reads (a backup
// aside, which is streamed): a longer answer is an error, read no further.
const MaxAnswerBytes = 8 << 20

// MaxRetryAfter bounds the Retry-After the client reports: a header that
// asks for longer reads as this (a day), one that is not a number of
// seconds as none. The body's retry_after_ms keeps the exact time.
const MaxRetryAfter = 24 * time.Hour

// ErrMalformedAnswer is wrapped by the error of an answer that is not what
// the API answers: not JSON, a JSON value of the wrong shape or types (a
// decision's "allowed" must be a JSON boolean, its numbers non-negative
// integers, and "allowed" must agree with the status), or longer than
// MaxAnswerBytes. A Guard answers it with its FailurePolicy.
var ErrMalformedAnswer = errors.New("limitnode: malformed answer")

// attemptRule says how a call goes when a node takes it and does not
// answer.
type attemptRule struct {
	// resend: the call may go on to the next address. Reads and puts
	// change nothing more when repeated; the cluster answers a settlement,
	// a lease's renewal and a decision with a request_id once however
	// often they come. A decision without a request_id may be charged once
	// more when the first node did decide it, never admitting more than
	// the limit: a lost decision costs a unit, not an answer. A lease's
	// acquire could take a second slot, and membership changes, returns of
	// shares, deletions and restores could answer a second attempt
	// differently: those are not resent.
	resend bool
	// bounded: an attempt gets a fraction of the call (decisions and
	// reads, which the cluster answers without waiting on purpose).
	bounded bool
}

// ruleOf is the attemptRule of a call of method on path.
func ruleOf(method, path string) attemptRule {
	decision := method == http.MethodPost && (path == "/v1/allow" || path == "/v1/allow/batch")
	read := method == http.MethodGet || method == http.MethodHead
	switch {
	case decision || read:
		return attemptRule{resend: true, bounded: true}
	case method == http.MethodPut:
		return attemptRule{resend: true}
	case method == http.MethodPost:
		return attemptRule{resend: path == "/v1/settle" || (strings.HasPrefix(path, "/v1/leases/") && strings.HasSuffix(path, "/renew"))}
	}
	return attemptRule{}
}

// callSpec is one call of the API.
type callSpec struct {
	method, path string
	in           any
	// ok are the statuses whose body is the answer; any other status is an
	// *Error.
	ok []int
	// hc makes the attempts; nil means the client's own.
	hc *http.Client
	// held is how long a node may hold the answer on purpose (a request
	// with hold), added to each attempt's time.
	held time.Duration
}

// answered is the answer that ended a call.
type answered struct {
	resp *http.Response
	body []byte
}

// call sends spec to the addresses in turn until one answers, as the
// comment at the top of this file says, and returns an answer whose status
// is in spec.ok; any other status is an *Error.
func (c *Client) call(ctx context.Context, spec callSpec) (answered, error) {
	var body []byte
	if spec.in != nil {
		var err error
		if body, err = json.Marshal(spec.in); err != nil {
			return answered{}, fmt.Errorf("limitnode: encode request: %w", err)
		}
	}
	hc := spec.hc
	if hc == nil {
		hc = c.http
	}
	rule := ruleOf(spec.method, spec.path)
	resend := rule.resend && len(c.addrs) > 1
	perAttempt := c.attemptTimeout(ctx, hc)
	start := int(c.preferred.Load())
	var lastErr, unknown error
	for i := range c.addrs {
		index := (start + i) % len(c.addrs)
		addr := c.addrs[index]
		attemptCtx, cancel := ctx, context.CancelFunc(func() {})
		if resend && rule.bounded && i < len(c.addrs)-1 && perAttempt > 0 {
			attemptCtx, cancel = context.WithTimeout(ctx, perAttempt+spec.held)
		}
		resp, data, err := c.attempt(attemptCtx, hc, spec.method, addr+spec.path, body)
		cancel()
		if err != nil {
			lastErr = err
			switch {
			case isDialError(err):
				continue
			case errors.Is(err, ErrMalformedAnswer):
				return answered{}, err
			case ctx.Err() == nil && resend:
				unknown = err
				continue
			}
			return answered{}, fmt.Errorf("limitnode: %s %s: %w", spec.method, addr+spec.path, err)
		}
		c.preferred.Store(int32(index))
		for _, code := range spec.ok {
			if resp.StatusCode == code {
				return answered{resp: resp, body: data}, nil
			}
		}
		return answered{resp: resp}, errorOfAnswer(addr, resp.StatusCode, data)
	}
	if unknown != nil {
		return answered{}, fmt.Errorf("limitnode: %s %s: no node answered in time (the outcome is unknown): %w", spec.method, spec.path, unknown)
	}
	return answered{}, unreachable(lastErr)
}

// attemptTimeout is how long an attempt that another address could follow
// may take: Options.AttemptTimeout, or a third of what the call has (the
// time ctx leaves it, or the HTTP client's Timeout), or 0 when neither
// bounds the call (the attempt then has the whole call).
func (c *Client) attemptTimeout(ctx context.Context, hc *http.Client) time.Duration {
	if c.perAttempt > 0 {
		return c.perAttempt
	}
	budget := hc.Timeout
	if deadline, ok := ctx.Deadline(); ok {
		if left := time.Until(deadline); budget == 0 || left < budget {
			budget = left
		}
	}
	return max(budget/3, 0)
}

// attempt sends one request to target and reads its whole answer, at most
// MaxAnswerBytes of it, within ctx.
func (c *Client) attempt(ctx context.Context, hc *http.Client, method, target string, body []byte) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.ContentLength > MaxAnswerBytes {
		return nil, nil, fmt.Errorf("%w: %s answered %d bytes, over %d", ErrMalformedAnswer, req.URL.Host, resp.ContentLength, MaxAnswerBytes)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("read the answer of %s: %w", req.URL.Host, err)
	}
	if len(data) > MaxAnswerBytes {
		return nil, nil, fmt.Errorf("%w: %s answered over %d bytes", ErrMalformedAnswer, req.URL.Host, MaxAnswerBytes)
	}
	return resp, data, nil
}

// errorOfAnswer is the *Error of an answer of addr whose status is not the
// call's.
func errorOfAnswer(addr string, status int, data []byte) *Error {
	var answer wire.Error
	if err := json.Unmarshal(data, &answer); err != nil {
		answer = wire.Error{Message: strings.TrimSpace(string(data))}
		if status == http.StatusBadRequest && strings.Contains(answer.Message, "HTTP request to an HTTPS server") {
			answer.Message = addr + " serves HTTPS: use an https:// address and trust the node's CA (Options.TLS; the CLI's -ca)"
		}
	}
	return errorOf(status, answer)
}

// isDialError reports whether err is a failure to connect, after which the
// request cannot have reached the node.
func isDialError(err error) bool {
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "dial"
}

// retryAfterOf reads a Retry-After header as delay-seconds, at most
// MaxRetryAfter; anything else (an HTTP date, a negative or malformed
// number) is 0.
func retryAfterOf(value string) time.Duration {
	if value == "" || strings.Trim(value, "0123456789") != "" {
		return 0
	}
	secs, err := strconv.ParseInt(value, 10, 64)
	if err != nil || secs > int64(MaxRetryAfter/time.Second) {
		return MaxRetryAfter
	}
	return time.Duration(secs) * time.Second
}
