package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/fsm"
)

// Size limits of the HTTP API, documented in the README.
const (
	// MaxBodyBytes bounds the body of a single request.
	MaxBodyBytes = 64 << 10
	// MaxKeyBytes, MaxRequestIDBytes and MaxChecks are the FSM's bounds.
	MaxKeyBytes       = fsm.MaxKeyBytes
	MaxRequestIDBytes = fsm.MaxRequestIDBytes
	MaxChecks         = fsm.MaxChecks
)

// apiError is an error the API reports to the caller as it is.
type apiError struct {
	status     int
	code       string
	field      string
	message    string
	retryAfter string // a Retry-After header to send with it, if any
}

func (e *apiError) Error() string { return e.message }

func invalid(field, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: "invalid_argument", field: field, message: fmt.Sprintf(format, args...)}
}

// decodeJSON decodes exactly one JSON value from the body into v, whatever
// the Content-Type: unknown fields, trailing data and a body over maxBytes
// are errors.
func decodeJSON(w http.ResponseWriter, r *http.Request, maxBytes int64, v any) *apiError {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, maxBytes)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return decodeError(err, maxBytes)
		}
		return invalid("", "the body must hold one JSON value and nothing after it")
	}
	return nil
}

func decodeError(err error, maxBytes int64) *apiError {
	var (
		tooLarge  *http.MaxBytesError
		typeErr   *json.UnmarshalTypeError
		syntaxErr *json.SyntaxError
	)
	switch {
	case errors.As(err, &tooLarge):
		return &apiError{status: http.StatusRequestEntityTooLarge, code: "payload_too_large",
			message: fmt.Sprintf("the body is larger than %d bytes", maxBytes)}
	case errors.As(err, &typeErr):
		want := typeErr.Type.String()
		if strings.HasPrefix(want, "int") || strings.HasPrefix(want, "*int") {
			want = "an integer"
		}
		return invalid(typeErr.Field, "%s must be %s, not a JSON %s", fieldName(typeErr.Field), want, typeErr.Value)
	case errors.As(err, &syntaxErr):
		return invalid("", "malformed JSON at byte %d: %v", syntaxErr.Offset, err)
	case errors.Is(err, io.EOF):
		return invalid("", "the body is empty; it must be a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("", "the JSON body ends too early")
	}
	if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return invalid(strings.Trim(field, `"`), "unknown field %s", field)
	}
	return invalid("", "malformed request: %v", err)
}

func fieldName(f string) string {
	if f == "" {
		return "the value"
	}
	return f
}

// limitJSON is a limit as the API spells it.
type limitJSON struct {
	Algorithm string  `json:"algorithm"`
	Rate      *int64  `json:"rate"`
	Period    *string `json:"period"`
	Burst     *int64  `json:"burst,omitempty"`
}

// checkJSON is one check of a multi-check request.
type checkJSON struct {
	Key        string            `json:"key"`
	Limit      *limitJSON        `json:"limit"`
	Cost       *int64            `json:"cost"`
	Policy     *string           `json:"policy"`
	Dimensions map[string]string `json:"dimensions"`
}

// allowJSON is the body of POST /v1/allow: one check inline, or several
// under "checks".
type allowJSON struct {
	Key        string            `json:"key"`
	Limit      *limitJSON        `json:"limit"`
	Cost       *int64            `json:"cost"`
	Policy     *string           `json:"policy"`
	Dimensions map[string]string `json:"dimensions"`
	RequestID  string            `json:"request_id"`
	Checks     []checkJSON       `json:"checks"`
}

// toRequest validates the body and returns the cluster request. Every error
// names the JSON path at fault.
func (a *allowJSON) toRequest() (cluster.Request, *apiError) {
	if len(a.RequestID) > MaxRequestIDBytes {
		return cluster.Request{}, invalid("request_id", "request_id must be at most %d bytes", MaxRequestIDBytes)
	}
	req := cluster.Request{RequestID: a.RequestID}
	if a.Checks == nil {
		single := checkJSON{Key: a.Key, Limit: a.Limit, Cost: a.Cost, Policy: a.Policy, Dimensions: a.Dimensions}
		c, err := single.toCheck("")
		if err != nil {
			return cluster.Request{}, err
		}
		req.Checks = []cluster.Check{c}
		return req, nil
	}
	if a.Key != "" || a.Limit != nil || a.Cost != nil || a.Policy != nil || a.Dimensions != nil {
		return cluster.Request{}, invalid("checks", "give either key/limit/policy/cost or checks, not both")
	}
	if len(a.Checks) == 0 || len(a.Checks) > MaxChecks {
		return cluster.Request{}, invalid("checks", "checks must hold 1 to %d checks", MaxChecks)
	}
	for i := range a.Checks {
		prefix := fmt.Sprintf("checks[%d].", i)
		c, err := a.Checks[i].toCheck(prefix)
		if err != nil {
			return cluster.Request{}, err
		}
		for j, prev := range req.Checks {
			if prev.Key == c.Key && prev.Limit == c.Limit && prev.Policy == c.Policy && c.Dimensions == nil && prev.Dimensions == nil {
				return cluster.Request{}, invalid(prefix+"key", "checks[%d] and checks[%d] name the same key and limit", j, i)
			}
		}
		req.Checks = append(req.Checks, c)
	}
	return req, nil
}

func (c *checkJSON) toCheck(prefix string) (cluster.Check, *apiError) {
	cost := int64(1)
	if c.Cost != nil {
		cost = *c.Cost
	}
	if cost < 0 {
		return cluster.Check{}, invalid(prefix+"cost", "cost must not be negative")
	}
	if c.Policy != nil {
		return c.toPolicyCheck(prefix, cost)
	}
	if c.Dimensions != nil {
		return cluster.Check{}, invalid(prefix+"dimensions", "dimensions go with a policy that has a key_template")
	}
	if c.Key == "" || len(c.Key) > MaxKeyBytes {
		return cluster.Check{}, invalid(prefix+"key", "key is required and must be 1 to %d bytes", MaxKeyBytes)
	}
	if c.Limit == nil {
		return cluster.Check{}, invalid(prefix+"limit", "limit (or policy) is required")
	}
	l, err := c.Limit.toLimit(prefix + "limit.")
	if err != nil {
		return cluster.Check{}, err
	}
	if err := l.ValidateCost(cost); err != nil {
		return cluster.Check{}, invalid(prefix+"cost", "cost must be an integer from 0 to %d (the most this limit can ever admit at once)", l.Capacity())
	}
	return cluster.Check{Key: c.Key, Limit: l, Cost: cost}, nil
}

// toPolicyCheck validates a check against a named policy. Whether the policy
// exists, and whether the cost fits its limit, is known only when the
// cluster applies the request.
func (c *checkJSON) toPolicyCheck(prefix string, cost int64) (cluster.Check, *apiError) {
	if c.Limit != nil {
		return cluster.Check{}, invalid(prefix+"limit", "give a limit or a policy, not both")
	}
	if err := fsm.ValidatePolicyName(*c.Policy); err != nil {
		return cluster.Check{}, invalid(prefix+"policy", "%s", err.Message)
	}
	switch {
	case c.Dimensions != nil && c.Key != "":
		return cluster.Check{}, invalid(prefix+"dimensions", "give a key or dimensions, not both")
	case c.Dimensions == nil && (c.Key == "" || len(c.Key) > MaxKeyBytes):
		return cluster.Check{}, invalid(prefix+"key", "key (or dimensions, for a policy with a key_template) is required; a key is 1 to %d bytes", MaxKeyBytes)
	case c.Dimensions != nil && (len(c.Dimensions) == 0 || len(c.Dimensions) > fsm.MaxDimensions):
		return cluster.Check{}, invalid(prefix+"dimensions", "dimensions must hold 1 to %d names", fsm.MaxDimensions)
	}
	for name, value := range c.Dimensions {
		if name == "" || len(name) > 64 || len(value) > fsm.MaxDimensionBytes {
			return cluster.Check{}, invalid(prefix+"dimensions", "dimension names are 1 to 64 bytes, values at most %d", fsm.MaxDimensionBytes)
		}
	}
	return cluster.Check{Key: c.Key, Policy: *c.Policy, Dimensions: c.Dimensions, Cost: cost}, nil
}

func (j *limitJSON) toLimit(prefix string) (algorithms.Limit, *apiError) {
	alg, err := algorithms.ParseAlgorithm(j.Algorithm)
	if err != nil {
		return algorithms.Limit{}, invalid(prefix+"algorithm", "unknown algorithm %q; one of token_bucket, leaky_bucket, gcra, fixed_window, sliding_window_log, sliding_window_counter", j.Algorithm)
	}
	if j.Rate == nil {
		return algorithms.Limit{}, invalid(prefix+"rate", "rate is required")
	}
	period := time.Second
	if j.Period != nil {
		period, err = time.ParseDuration(*j.Period)
		if err != nil {
			return algorithms.Limit{}, invalid(prefix+"period", "period %q is not a Go duration such as \"500ms\", \"1m\" or \"24h\"", *j.Period)
		}
	}
	l := algorithms.Limit{Algorithm: alg, Rate: *j.Rate, PeriodNanos: int64(period)}
	switch {
	case j.Burst != nil && !alg.IsBucket():
		return algorithms.Limit{}, invalid(prefix+"burst", "burst applies to token_bucket, leaky_bucket and gcra; %s admits up to rate per period", alg)
	case j.Burst != nil:
		l.Burst = *j.Burst
	case alg.IsBucket():
		l.Burst = l.Rate
	}
	if err := l.Validate(); err != nil {
		var fe *algorithms.FieldError
		if errors.As(err, &fe) {
			return algorithms.Limit{}, invalid(prefix+fe.Field, "%s", fe.Error())
		}
		return algorithms.Limit{}, invalid(strings.TrimSuffix(prefix, "."), "%v", err)
	}
	return l, nil
}
