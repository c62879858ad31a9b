package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/limitnode/limitnode/internal/jsonpos"
)

// Size limits of request bodies, documented in the README.
const (
	// MaxBodyBytes bounds the body of a single request.
	MaxBodyBytes = 64 << 10
	// MaxBatchBodyBytes bounds the body of POST /v1/allow/batch and of
	// PUT /v1/policies/{name}.
	MaxBatchBodyBytes = 4 << 20
)

// decodeJSON decodes exactly one JSON value from the body into v, whatever
// the Content-Type of a program's request (a browser's must be JSON, see
// refuseBrowserBody): unknown fields, trailing data, a body over maxBytes
// and what checkStrict refuses (a field given twice, a field name in
// another case, invalid UTF-8) are errors.
func decodeJSON(w http.ResponseWriter, r *http.Request, maxBytes int64, v any) *apiError {
	if err := refuseBrowserBody(r, "application/json"); err != nil {
		return err
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBytes))
	if err != nil {
		return decodeError(err, maxBytes)
	}
	if err := checkStrict(body, reflect.TypeOf(v)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if pos, ok := jsonpos.OfError(body, err); ok && errors.As(err, new(*json.SyntaxError)) {
			return invalid("", "malformed JSON at %s: %v", pos, err)
		}
		if typeErr := new(*json.UnmarshalTypeError); errors.As(err, typeErr) {
			if field, ok := fieldAt(body, (*typeErr).Offset); ok {
				(*typeErr).Field = field
			}
		}
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
		return &apiError{status: http.StatusRequestEntityTooLarge, code: codePayloadTooLarge,
			message: fmt.Sprintf("the body is larger than %d bytes", maxBytes)}
	case errors.As(err, &typeErr):
		want := typeErr.Type.String()
		switch indirectKind := indirect(typeErr.Type).Kind(); {
		case strings.HasPrefix(want, "int") || strings.HasPrefix(want, "*int"):
			want = "an integer"
		case indirectKind == reflect.Struct || indirectKind == reflect.Map:
			want = "a JSON object"
		case indirectKind == reflect.Slice || indirectKind == reflect.Array:
			want = "a JSON array"
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

// writeJSON answers with v as a JSON body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// An answer is JSON for programs, not HTML: "<token>" stays readable.
	enc.SetEscapeHTML(false)
	var data []byte
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		data = []byte(`{"error":"could not encode the response","code":"internal"}` + "\n")
	} else {
		data = buf.Bytes()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// durationField reads a JSON field that holds a Go duration ("500ms",
// "30s"); an absent one is 0. A malformed one is a 400 naming the field.
func durationField(name string, s *string) (time.Duration, *apiError) {
	if s == nil {
		return 0, nil
	}
	d, err := time.ParseDuration(*s)
	if err != nil {
		return 0, invalid(name, "%s %q is not a Go duration such as \"500ms\" or \"30s\"", name, *s)
	}
	return d, nil
}
