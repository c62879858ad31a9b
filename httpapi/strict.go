package httpapi

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Go's JSON decoder accepts a body that means two things: a name given
// twice (the last wins), a name in another case ("Key", even "\u212aey",
// for "key"), and strings that are not valid UTF-8 (read as U+FFFD, so that
// two different invalid keys would share one counter). checkStrict refuses
// all three, naming the field, before the body is decoded. It refuses
// unknown fields too: the decoder names one without the objects it is in
// ("unit" for "limit.unit"), and a value of the wrong type by its Go
// fields, without the index of the array element ("checks.limit.rate" for
// "checks[1].limit.rate"), which fieldAt finds.

// checkStrict walks body's JSON alongside the Go type it will be decoded
// into. It answers only what the decoder itself would accept wrongly;
// syntax and type errors are left to the decoder's messages.
func checkStrict(body []byte, t reflect.Type) *apiError {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := walkStrict(dec, t, ""); err != nil && err != errSyntax {
		return err
	}
	return nil
}

// errSyntax stops the walk at malformed JSON, which the decoder reports.
var errSyntax = &apiError{}

func walkStrict(dec *json.Decoder, t reflect.Type, path string) *apiError {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := dec.Token()
	if err != nil {
		return errSyntax
	}
	switch tok := tok.(type) {
	case string:
		return checkString(tok, path)
	case json.Delim:
		switch {
		case tok == '{' && t.Kind() == reflect.Struct && !decodesItself(t):
			return walkObject(dec, path, func(name string) (reflect.Type, *apiError) {
				if f, ok := fieldNamed(t, name); ok {
					return f, nil
				}
				field := joinField(path, name)
				if exact, ok := foldedField(t, name); ok {
					return nil, invalid(field, "unknown field %q: field names are case-sensitive (did you mean %q?)", name, exact)
				}
				return nil, invalid(field, "unknown field %q", field)
			})
		case tok == '{':
			elem := anyType
			if t.Kind() == reflect.Map {
				elem = t.Elem()
			}
			return walkObject(dec, path, func(string) (reflect.Type, *apiError) { return elem, nil })
		case tok == '[':
			elem := anyType
			if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
				elem = t.Elem()
			}
			for i := 0; dec.More(); i++ {
				if err := walkStrict(dec, elem, path+"["+strconv.Itoa(i)+"]"); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return errSyntax
			}
		}
	}
	return nil
}

var anyType = reflect.TypeFor[any]()

// decodesItself reports whether t reads its own JSON (json.Unmarshaler or
// encoding.TextUnmarshaler), whose fields are then its own business.
func decodesItself(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return p.Implements(reflect.TypeFor[json.Unmarshaler]()) || p.Implements(reflect.TypeFor[encoding.TextUnmarshaler]())
}

// jsonContainer is an object or array fieldAt is reading: its path, and
// the path of its next value.
type jsonContainer struct {
	path, next string
	array      bool
	index      int
	wantName   bool
}

// valueRead moves c past a value: to the next element of an array, to the
// next name of an object.
func (c *jsonContainer) valueRead() {
	if c.array {
		c.index++
		c.next = c.path + "[" + strconv.Itoa(c.index) + "]"
		return
	}
	c.wantName = true
}

// fieldAt returns the path (as joinField and walkStrict write it, with
// array indexes) of the value of body's JSON that ends at offset, where
// the decoder reports a value of the wrong type; false when no value ends
// there.
func fieldAt(body []byte, offset int64) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var open []*jsonContainer
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		var in *jsonContainer
		if len(open) > 0 {
			in = open[len(open)-1]
		}
		if name, ok := tok.(string); ok && in != nil && in.wantName {
			in.next, in.wantName = joinField(in.path, name), false
			continue
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			open = open[:len(open)-1]
			if len(open) > 0 {
				open[len(open)-1].valueRead()
			}
			continue
		}
		path := ""
		if in != nil {
			path = in.next
		}
		if dec.InputOffset() == offset {
			return path, true
		}
		switch tok {
		case json.Delim('{'):
			open = append(open, &jsonContainer{path: path, wantName: true})
		case json.Delim('['):
			open = append(open, &jsonContainer{path: path, array: true, next: path + "[0]"})
		default:
			if in != nil {
				in.valueRead()
			}
		}
	}
}

// walkObject walks an object's members: each name once, valid UTF-8, and
// a name that differs from a known field only in case is refused.
func walkObject(dec *json.Decoder, path string, typeOf func(name string) (reflect.Type, *apiError)) *apiError {
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return errSyntax
		}
		name, _ := tok.(string)
		field := joinField(path, name)
		if err := checkString(name, field); err != nil {
			return err
		}
		if seen[name] {
			return invalid(field, "%s is given twice; give each field once", field)
		}
		seen[name] = true
		t, apiErr := typeOf(name)
		if apiErr != nil {
			return apiErr
		}
		if t == nil {
			t = anyType
		}
		if err := walkStrict(dec, t, field); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return errSyntax
	}
	return nil
}

// checkString refuses a string that was not valid UTF-8 (the decoder turns
// each bad byte into U+FFFD, so U+FFFD itself is refused too). Every path
// segment of every route is read by the same rule (API.route), so that a
// key is the same bytes whether a body or a path names it.
func checkString(s, field string) *apiError {
	if !utf8.ValidString(s) || strings.ContainsRune(s, utf8.RuneError) {
		return invalid(field, "%s must be valid UTF-8 (and hold no U+FFFD replacement character)", fieldName(field))
	}
	return nil
}

// fieldNamed finds the field of struct t whose JSON name is exactly name.
func fieldNamed(t reflect.Type, name string) (reflect.Type, bool) {
	f, ok := fieldsOf(t).byName[name]
	return f, ok
}

// foldedField finds the JSON name of the field of t that name matches only
// when case is ignored, as Go's decoder would match it.
func foldedField(t reflect.Type, name string) (string, bool) {
	for _, f := range fieldsOf(t).list {
		if strings.EqualFold(f.name, name) {
			return f.name, true
		}
	}
	return "", false
}

type jsonField struct {
	name string
	typ  reflect.Type
}

// typeFields are a struct type's JSON fields, in order and by name.
type typeFields struct {
	list   []jsonField
	byName map[string]reflect.Type
}

// fieldCache holds the typeFields of each struct type walked: a request
// body's types are few and fixed, and reflecting on them anew for every
// member of every body cost a tenth of a node's CPU on /v1/allow.
var fieldCache sync.Map // reflect.Type -> *typeFields

// fieldsOf returns t's JSON fields, from the cache once known.
func fieldsOf(t reflect.Type) *typeFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*typeFields)
	}
	f := &typeFields{list: jsonFields(t), byName: map[string]reflect.Type{}}
	for _, field := range f.list {
		if _, dup := f.byName[field.name]; !dup {
			f.byName[field.name] = field.typ // the first, as the scan found it
		}
	}
	cached, _ := fieldCache.LoadOrStore(t, f)
	return cached.(*typeFields)
}

// jsonFields are the JSON names of t's exported fields, those of embedded
// structs among them, as the decoder sees them.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for _, f := range reflect.VisibleFields(t) {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		embedded := f.Anonymous && tag == "" && indirect(f.Type).Kind() == reflect.Struct
		if !f.IsExported() || embedded || tag == "-" {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		out = append(out, jsonField{tag, f.Type})
	}
	return out
}

func indirect(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func joinField(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
