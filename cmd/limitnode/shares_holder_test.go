package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/limitnode/limitnode/contract"
)

// TestASharesUnitsGoBackOnlyFromItsHolder attacks POST /v1/shares/return
// as a stranger would, on a node without tokens and on one with them. A
// victim takes a share of 20 of a key's 50 an hour and spends it on its
// own; the attacker knows the share's number (share IDs were once an entry
// index and a position, easy to guess) and returns it in every form it can
// make: the bare number, the number with a secret of its own, and, with
// tokens, the victim's whole id under its own token. Each is refused and
// gives nothing back, so every caller together admits no more than 50.
// The victim's own return, of what it did not spend, is taken.
func TestASharesUnitsGoBackOnlyFromItsHolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	victimToken, victimEntry := newToken(t, "victim", "decide")
	attackerToken, attackerEntry := newToken(t, "attacker", "decide")
	tokens := filepath.Join(dir, "tokens.json")
	writeTokenFile(t, tokens, victimEntry, attackerEntry)

	for _, mode := range []struct {
		name             string
		flags            []string
		victim, attacker string
	}{
		{"no tokens", nil, "", ""},
		{"tokens", []string{"-auth", tokens}, victimToken, attackerToken},
	} {
		t.Run(mode.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			args := append([]string{"-id", "n1", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", t.TempDir()}, mode.flags...)
			base := "http://" + startNode(t, ctx, args, nil).addr
			call := func(token, path, body string) (int, map[string]any) {
				t.Helper()
				req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var out map[string]any
				if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				return resp.StatusCode, out
			}
			const check = `"key":"k","limit":{"algorithm":"sliding_window_log","rate":50,"period":"1h"}`
			status, granted := call(mode.victim, "/v1/allow", `{`+check+`,"take_share":{"units":20,"ttl":"1s"}}`)
			share, _ := granted["share"].(map[string]any)
			if status != http.StatusOK || share == nil || share["units"] != 20.0 {
				t.Fatalf("the victim's share: %d %v", status, granted)
			}
			id := share["id"].(string)
			number, _, _ := strings.Cut(id, ".")
			returns := []struct {
				name   string
				token  string
				id     string
				status int
			}{
				{"the bare share number", mode.attacker, number, http.StatusBadRequest},
				{"the number with a secret of the attacker's", mode.attacker, number + "." + hex.EncodeToString(contract.NewShareSecret()), http.StatusForbidden},
			}
			if mode.attacker != "" {
				returns = append(returns, struct {
					name   string
					token  string
					id     string
					status int
				}{"the victim's whole id under another token", mode.attacker, id, http.StatusForbidden})
			}
			for _, r := range returns {
				status, body := call(r.token, "/v1/shares/return", `{`+check+`,"id":"`+r.id+`","unspent":20}`)
				if status != r.status || body["field"] != "id" {
					t.Errorf("%s: %d %v, want %d naming the id", r.name, status, body, r.status)
				}
			}
			// The victim gives back 5 it will not spend, once, and spends
			// the other 15 on its own; every caller then asks the log for
			// what is left.
			for i, want := range []float64{5, 0} {
				if status, body := call(mode.victim, "/v1/shares/return", `{`+check+`,"id":"`+id+`","unspent":5}`); status != http.StatusOK || body["returned"] != want {
					t.Fatalf("the victim's return %d: %d %v, want %v returned", i+1, status, body, want)
				}
			}
			admitted := 1 + 15
			for range 40 {
				if status, _ := call(mode.attacker, "/v1/allow", `{`+check+`}`); status == http.StatusOK {
					admitted++
				}
			}
			if admitted != 50 {
				t.Errorf("%d admitted in all on a limit of 50", admitted)
			}
		})
	}
}
