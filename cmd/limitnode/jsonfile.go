package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/limitnode/limitnode/internal/jsonpos"
)

// readJSONFile decodes the one JSON value of the file name ("-": standard
// input), of at most maxBytes, into v, which is what (for errors: "a
// policy"); unknown fields are errors. A mistake is said with the line,
// column and byte where it is.
func readJSONFile(name, what string, maxBytes int64, v any) error {
	in, err := openInput(name)
	if err != nil {
		return err
	}
	defer in.Close()
	if name == "-" {
		name = "standard input"
	}
	data, err := io.ReadAll(io.LimitReader(in, maxBytes+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	if int64(len(data)) > maxBytes {
		return fmt.Errorf("%s is larger than %d bytes", name, maxBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	if err == nil {
		rest := bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n")
		if len(rest) > 0 {
			return fmt.Errorf("%s: %s: the file must hold %s, one JSON value, and nothing after it", name, jsonpos.At(data, int64(len(data)-len(rest))), what)
		}
	}
	switch pos, ok := jsonpos.OfError(data, err); {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%s is empty: it must hold %s, a JSON object", name, what)
	case ok:
		return fmt.Errorf("%s: %s: not %s: %w", name, pos, what, err)
	}
	return fmt.Errorf("%s: not %s: %w", name, what, err)
}
