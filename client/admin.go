package client

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/limitnode/limitnode/api/wire"
	"github.com/limitnode/limitnode/rls"
)

// The operator's side of the API: membership, policies, backups, health.

// RemoveMember removes the member with ID id from the cluster. It is
// refused, changing nothing, when the members left would have fewer
// answering voters than a quorum; RemoveMemberWith can force it.
func (c *Client) RemoveMember(ctx context.Context, id string) error {
	return c.RemoveMemberWith(ctx, id, MemberChange{})
}

// RemoveMemberWith is RemoveMember with the checks that change lifts
// (Force; Replace means nothing to a removal).
func (c *Client) RemoveMemberWith(ctx context.Context, id string, change MemberChange) error {
	path := "/v1/cluster/nodes/" + url.PathEscape(id)
	if change.Force {
		path += "?force=true"
	}
	_, err := c.do(ctx, http.MethodDelete, path, nil, nil, http.StatusOK)
	return err
}

// TransferLeadership hands leadership over to the member to (any other
// voter when to is "") and returns the cluster as the node then sees it.
func (c *Client) TransferLeadership(ctx context.Context, to string) (ClusterStatus, error) {
	var st ClusterStatus
	var in any
	if to != "" {
		in = map[string]string{"to": to}
	}
	_, err := c.do(ctx, http.MethodPost, "/v1/cluster/transfer-leadership", in, &st, http.StatusOK)
	return st, err
}

// Policy is a named limit stored in the cluster (wire.Policy spells it):
// a limit, per-key overrides, shadow mode, and a key template whose
// {dimensions} a check fills in, and local shares. ShadowDenied is what
// the cluster counted, and Version the log index of the policy's last
// change (which denials name as denied_by.policy_version); a put sets
// neither.
type Policy struct {
	Name         string
	Limit        *Limit
	Overrides    map[string]*Limit
	Shadow       bool
	KeyTemplate  string
	ShadowDenied *int64
	LocalShares  *LocalShares
	Version      uint64
	// Penalty, when set, blocks a key the policy denies often.
	Penalty *Penalty
	// MaxDebt is how far beyond empty a settlement may charge a key.
	MaxDebt int64
}

// Penalty blocks a key a policy denies often (wire.Penalty): after Denials
// denials within Within (a Go duration such as "1m") of the first, for
// BlockFor.
type Penalty = wire.Penalty

func (p Policy) toWire() wire.Policy {
	out := wire.Policy{Name: p.Name, Limit: p.Limit.toWire(), Shadow: p.Shadow, KeyTemplate: p.KeyTemplate, ShadowDenied: p.ShadowDenied,
		LocalShares: p.LocalShares.toWire(), Penalty: p.Penalty, MaxDebt: p.MaxDebt}
	if len(p.Overrides) > 0 {
		out.Overrides = make(map[string]*wire.Limit, len(p.Overrides))
		for key, l := range p.Overrides {
			out.Overrides[key] = l.toWire()
		}
	}
	return out
}

func policyFromWire(p wire.Policy) (Policy, error) {
	limit, err := limitFromWire(p.Limit)
	if err != nil {
		return Policy{}, fmt.Errorf("limit.%w", err)
	}
	shares, err := sharesFromWire(p.LocalShares)
	if err != nil {
		return Policy{}, err
	}
	out := Policy{Name: p.Name, Limit: limit, Shadow: p.Shadow, KeyTemplate: p.KeyTemplate, ShadowDenied: p.ShadowDenied,
		LocalShares: shares, Version: p.Version, Penalty: p.Penalty, MaxDebt: p.MaxDebt}
	if len(p.Overrides) > 0 {
		out.Overrides = make(map[string]*Limit, len(p.Overrides))
		for key, l := range p.Overrides {
			if out.Overrides[key], err = limitFromWire(l); err != nil {
				return Policy{}, fmt.Errorf("overrides[%q].%w", key, err)
			}
		}
	}
	return out, nil
}

// policyAnswer makes one policy call whose answer is a policy.
func (c *Client) policyAnswer(ctx context.Context, method, name string, in any) (Policy, error) {
	var out wire.Policy
	if _, err := c.do(ctx, method, "/v1/policies/"+url.PathEscape(name), in, &out, http.StatusOK); err != nil {
		return Policy{}, err
	}
	p, err := policyFromWire(out)
	if err != nil {
		return Policy{}, fmt.Errorf("%w: policy %q: %w", ErrMalformedAnswer, name, err)
	}
	return p, nil
}

// PutPolicy creates or replaces the policy name.
func (c *Client) PutPolicy(ctx context.Context, name string, p Policy) (Policy, error) {
	return c.policyAnswer(ctx, http.MethodPut, name, p.toWire())
}

// GetPolicy returns the policy name as the node has applied it.
func (c *Client) GetPolicy(ctx context.Context, name string) (Policy, error) {
	return c.policyAnswer(ctx, http.MethodGet, name, nil)
}

// DeletePolicy deletes the policy name.
func (c *Client) DeletePolicy(ctx context.Context, name string) error {
	_, err := c.do(ctx, http.MethodDelete, "/v1/policies/"+url.PathEscape(name), nil, nil, http.StatusOK)
	return err
}

// PolicyPage is a page of GET /v1/policies.
type PolicyPage struct {
	Policies []Policy
	// Next, when not "", is where the next page starts (ListPolicies'
	// after).
	Next string
}

// ListPolicies returns a page of up to limit policies (0: the server's
// default) named after after.
func (c *Client) ListPolicies(ctx context.Context, after string, limit int) (PolicyPage, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var page wire.PolicyPage
	if _, err := c.do(ctx, http.MethodGet, "/v1/policies?"+q.Encode(), nil, &page, http.StatusOK); err != nil {
		return PolicyPage{}, err
	}
	out := PolicyPage{Next: page.Next}
	for _, p := range page.Policies {
		policy, err := policyFromWire(p)
		if err != nil {
			return PolicyPage{}, fmt.Errorf("%w: policy %q: %w", ErrMalformedAnswer, p.Name, err)
		}
		out.Policies = append(out.Policies, policy)
	}
	return out, nil
}

// PutRLSConfig creates or replaces the configuration of the Envoy rate
// limit service domain c.Domain (rls.Parse reads one from
// envoyproxy/ratelimit's YAML) and returns it as stored.
func (c *Client) PutRLSConfig(ctx context.Context, config rls.Config) (rls.Config, error) {
	var out rls.Config
	_, err := c.do(ctx, http.MethodPut, "/v1/rls/domains/"+url.PathEscape(config.Domain), config, &out, http.StatusOK)
	return out, err
}

// GetRLSConfig returns a domain's configuration as the node has applied it.
func (c *Client) GetRLSConfig(ctx context.Context, domain string) (rls.Config, error) {
	var out rls.Config
	_, err := c.do(ctx, http.MethodGet, "/v1/rls/domains/"+url.PathEscape(domain), nil, &out, http.StatusOK)
	return out, err
}

// DeleteRLSConfig deletes a domain's configuration.
func (c *Client) DeleteRLSConfig(ctx context.Context, domain string) error {
	_, err := c.do(ctx, http.MethodDelete, "/v1/rls/domains/"+url.PathEscape(domain), nil, nil, http.StatusOK)
	return err
}

// ListRLSDomains returns the names of the configured domains, sorted.
func (c *Client) ListRLSDomains(ctx context.Context) ([]string, error) {
	var out struct {
		Domains []string `json:"domains"`
	}
	_, err := c.do(ctx, http.MethodGet, "/v1/rls/domains", nil, &out, http.StatusOK)
	return out.Domains, err
}

// Readiness is the answer of /readyz.
type Readiness struct {
	Ready  bool
	Reason string
}

// Ready asks a node whether it serves as a member (/readyz), and why not.
func (c *Client) Ready(ctx context.Context) (Readiness, error) {
	var r wire.Readiness
	resp, err := c.do(ctx, http.MethodGet, "/readyz", nil, &r, http.StatusOK, http.StatusServiceUnavailable)
	if err != nil {
		return Readiness{}, err
	}
	return Readiness{Ready: resp.StatusCode == http.StatusOK, Reason: r.Reason}, nil
}

// BackupInfo describes a backup file.
type BackupInfo struct {
	// Index is the log index whose state the file holds.
	Index uint64
	// LimitsDigest is the SHA-256 of the limits state it holds, in hex.
	LimitsDigest string
	// ServedBy is the ID of the node that wrote it.
	ServedBy string
}

// Backup writes a backup file of a node's state to w.
func (c *Client) Backup(ctx context.Context, w io.Writer) (BackupInfo, error) {
	resp, err := c.stream(ctx, http.MethodGet, "/v1/snapshot", nil, 0)
	if err != nil {
		return BackupInfo{}, err
	}
	defer resp.Body.Close()
	info := BackupInfo{LimitsDigest: resp.Header.Get("X-Limitnode-Limits-Digest"), ServedBy: resp.Header.Get("X-Limitnode-Served-By")}
	info.Index, _ = strconv.ParseUint(resp.Header.Get("X-Limitnode-Applied-Index"), 10, 64)
	if _, err := io.Copy(w, resp.Body); err != nil {
		return info, fmt.Errorf("limitnode: read the backup: %w", err)
	}
	return info, nil
}

// RestoreResult is the answer of a restore.
type RestoreResult = wire.Restored

// Restore replaces the cluster's state with the backup file of size bytes
// in r. A node that is not the leader answers with the leader's address,
// where it is sent again, read afresh (r must allow reads at once from
// several offsets, as an *os.File and a *bytes.Reader do: the first
// attempt's transport may still be reading when the second starts).
func (c *Client) Restore(ctx context.Context, r io.ReaderAt, size int64) (RestoreResult, error) {
	resp, err := c.stream(ctx, http.MethodPost, "/v1/snapshot", r, size)
	if err != nil {
		return RestoreResult{}, err
	}
	defer resp.Body.Close()
	var out RestoreResult
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return out, fmt.Errorf("limitnode: decode the answer to a restore: %w", err)
	}
	if _, err := hex.DecodeString(out.LimitsDigest); err != nil {
		return out, fmt.Errorf("limitnode: the answer to a restore has no digest")
	}
	return out, nil
}

// stream sends a request whose body (if any) is the size bytes of body,
// and returns a 200 answer to be read by the caller; any other answer is an
// *Error. It tries the addresses in turn as do does, and follows a redirect
// to the leader once.
func (c *Client) stream(ctx context.Context, method, path string, body io.ReaderAt, size int64) (*http.Response, error) {
	var lastErr error
	for _, addr := range c.addrs {
		resp, err := c.send(ctx, method, addr+path, body, size)
		if err != nil && isDialError(err) {
			lastErr = err
			continue
		}
		if err == nil && resp.StatusCode == http.StatusTemporaryRedirect && resp.Header.Get("Location") != "" {
			resp.Body.Close()
			resp, err = c.send(ctx, method, resp.Header.Get("Location"), body, size)
		}
		if err != nil {
			return nil, fmt.Errorf("limitnode: %s %s: %w", method, path, err)
		}
		if resp.StatusCode == http.StatusOK {
			return resp, nil
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var body wire.Error
		if err := json.Unmarshal(data, &body); err != nil || body.Message == "" {
			body.Message = string(data)
		}
		return nil, errorOf(resp.StatusCode, body)
	}
	return nil, unreachable(lastErr)
}

// send sends one request to target with the size bytes of body (none if
// nil), read through a reader of its own, without following redirects or
// bounding its time (a backup may take longer than a call): ctx does.
func (c *Client) send(ctx context.Context, method, target string, body io.ReaderAt, size int64) (*http.Response, error) {
	var reader io.Reader
	if body != nil {
		reader = io.NewSectionReader(body, 0, size)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, reader)
	if err != nil {
		return nil, err
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	hc := *c.http
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	hc.Timeout = 0
	return hc.Do(req)
}
