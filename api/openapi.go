package api

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"

	"go.yaml.in/yaml/v3"
)

//go:embed openapi.yaml
var openAPIYAML []byte

// YAML returns the OpenAPI document as written in api/openapi.yaml. The
// slice is a copy: the caller may change it.
func YAML() []byte { return slices.Clone(openAPIYAML) }

// JSON returns the OpenAPI document converted to JSON: compact, object keys
// sorted, HTML characters not escaped, ending in a newline. The conversion
// runs once; later calls return a copy of its result (or its error, which
// only a broken openapi.yaml can cause).
func JSON() ([]byte, error) {
	data, err := openAPIJSON()
	if err != nil {
		return nil, err
	}
	return slices.Clone(data), nil
}

var openAPIJSON = sync.OnceValues(func() ([]byte, error) { return yamlToJSON(openAPIYAML) })

// yamlToJSON converts one YAML document to JSON. It works on yaml.Node
// rather than decoding into any, so that every mapping becomes a
// map[string]any (JSON objects have string keys), timestamps stay the
// strings they were written as, and anything JSON cannot hold (NaN,
// infinities, merge keys, several documents) is an error rather than a
// silent change.
func yamlToJSON(src []byte) ([]byte, error) {
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("openapi.yaml: holds more than one YAML document")
	}
	v, err := nodeToJSONValue(&doc)
	if err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	return buf.Bytes(), nil
}

// nodeToJSONValue converts a YAML node to the value encoding/json encodes
// as the same JSON: map[string]any, []any, string, bool, int64, uint64,
// float64 or nil.
func nodeToJSONValue(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return nil, fmt.Errorf("line %d: an empty document", n.Line)
		}
		return nodeToJSONValue(n.Content[0])
	case yaml.AliasNode:
		return nodeToJSONValue(n.Alias)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := nodeToJSONValue(c)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: a mapping key must be a scalar", k.Line)
			}
			if k.ShortTag() == "!!merge" {
				return nil, fmt.Errorf("line %d: merge keys (<<) are not supported", k.Line)
			}
			if _, dup := out[k.Value]; dup {
				return nil, fmt.Errorf("line %d: key %q appears twice", k.Line, k.Value)
			}
			val, err := nodeToJSONValue(v)
			if err != nil {
				return nil, err
			}
			// A key is its text: 200 and "200" are the same JSON key.
			out[k.Value] = val
		}
		return out, nil
	case yaml.ScalarNode:
		return scalarToJSONValue(n)
	}
	return nil, fmt.Errorf("line %d: unexpected YAML node kind %d", n.Line, n.Kind)
}

func scalarToJSONValue(n *yaml.Node) (any, error) {
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		err := n.Decode(&b)
		return b, err
	case "!!int":
		var i int64
		if err := n.Decode(&i); err == nil {
			return i, nil
		}
		var u uint64
		if err := n.Decode(&u); err != nil {
			return nil, fmt.Errorf("line %d: integer %s does not fit in 64 bits", n.Line, n.Value)
		}
		return u, nil
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return nil, err
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("line %d: JSON has no %s", n.Line, n.Value)
		}
		return f, nil
	case "!!str", "!!timestamp", "!!binary":
		return n.Value, nil
	}
	return nil, fmt.Errorf("line %d: unsupported YAML tag %s", n.Line, n.Tag)
}
