package client

import (
	"bytes"
	"encoding/json"

	"github.com/limitnode/limitnode/api/wire"
)

// The Go types of this package spell themselves in JSON as the API does,
// through the one definition of each body in package wire, so that a
// program (limitnode's CLI among them) can read and print them as files.

// MarshalJSON spells l as the API does (wire.Limit).
func (l Limit) MarshalJSON() ([]byte, error) { return json.Marshal(l.toWire()) }

// UnmarshalJSON reads l as the API spells it; an unknown field is an error.
func (l *Limit) UnmarshalJSON(data []byte) error {
	var w wire.Limit
	if err := strictUnmarshal(data, &w); err != nil {
		return err
	}
	out, err := limitFromWire(&w)
	if err != nil {
		return err
	}
	*l = *out
	return nil
}

// MarshalJSON spells p as the API does (wire.Policy).
func (p Policy) MarshalJSON() ([]byte, error) { return json.Marshal(p.toWire()) }

// UnmarshalJSON reads p as the API spells it; an unknown field is an error.
func (p *Policy) UnmarshalJSON(data []byte) error {
	var w wire.Policy
	if err := strictUnmarshal(data, &w); err != nil {
		return err
	}
	out, err := policyFromWire(w)
	if err != nil {
		return err
	}
	*p = out
	return nil
}

// MarshalJSON spells r as the body of POST /v1/allow (wire.AllowRequest).
func (r AllowRequest) MarshalJSON() ([]byte, error) { return json.Marshal(r.toWire()) }

func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
