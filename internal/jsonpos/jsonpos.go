// Package jsonpos says where in a JSON text encoding/json stopped: the line
// and column of a byte offset, as editors number them, so that an error
// in a file or a body can be found without counting bytes.
package jsonpos

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// Position is a place in a text: Line and Column count from 1, Column in
// characters (a multi-byte UTF-8 character is one); Offset is in bytes from 0.
type Position struct {
	Line, Column int
	Offset       int64
}

// String is "line L, column C (byte O)".
func (p Position) String() string {
	return fmt.Sprintf("line %d, column %d (byte %d)", p.Line, p.Column, p.Offset)
}

// At is the position of the byte at offset in data (the end of data when
// offset is past it).
func At(data []byte, offset int64) Position {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line := bytes.Count(before, []byte{'\n'}) + 1
	lineStart := bytes.LastIndexByte(before, '\n') + 1
	return Position{Line: line, Column: utf8.RuneCount(before[lineStart:]) + 1, Offset: offset}
}

// OfError is the position in data at which decoding it failed with err,
// an error of encoding/json: the offending byte of a syntax error, the end
// of the value of a type error, the end of data for a text that ends too
// early. ok is false for an error that carries no place.
func OfError(data []byte, err error) (pos Position, ok bool) {
	var (
		syntaxErr *json.SyntaxError
		typeErr   *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &syntaxErr):
		// Offset counts the bytes read, the offending one among them.
		return At(data, syntaxErr.Offset-1), true
	case errors.As(err, &typeErr):
		return At(data, typeErr.Offset), true
	case errors.Is(err, io.ErrUnexpectedEOF):
		return At(data, int64(len(data))), true
	}
	return Position{}, false
}
