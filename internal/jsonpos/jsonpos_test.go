package jsonpos

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestOfError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data string
		want Position
	}{
		{"a missing comma on the third line", "{\n  \"rate\": 10,\n  \"period\": \"1m\"\n  \"burst\": 2}", Position{Line: 4, Column: 3, Offset: 35}},
		{"a stray character on the first line", `{"rate": 10,, "period": "1m"}`, Position{Line: 1, Column: 13, Offset: 12}},
		{"a character after a multi-byte one counts as one column", "{\"key\": \"é\" x}", Position{Line: 1, Column: 13, Offset: 13}},
		{"a text that ends too early", "{\n  \"rate\": 10,\n", Position{Line: 3, Column: 1, Offset: 16}},
		{"a value of the wrong type", "{\n  \"rate\": \"ten\"}", Position{Line: 2, Column: 16, Offset: 17}},
	}
	for _, tt := range tests {
		var v struct {
			Rate   int    `json:"rate"`
			Period string `json:"period"`
			Burst  int    `json:"burst"`
			Key    string `json:"key"`
		}
		err := json.NewDecoder(bytes.NewReader([]byte(tt.data))).Decode(&v)
		got, ok := OfError([]byte(tt.data), err)
		if !ok || got != tt.want {
			t.Errorf("%s: %v at %+v (%v), want %+v", tt.name, err, got, ok, tt.want)
		}
	}
}
