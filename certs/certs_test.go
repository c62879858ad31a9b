package certs

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitnode/limitnode/internal/testenv"
)

func TestWriteDevMakesCertificatesTheCAVerifies(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files, err := WriteDev(dir, []string{"n1", "n2"})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := LoadPool(files[CAName].Cert, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"n1", "n2"} {
		pair, err := LoadKeyPair(files[name].Cert, files[name].Key, nil)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(pair.Certificate().Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, host := range []string{"127.0.0.1", "::1", "localhost", name} {
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool.CertPool(), DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}); err != nil {
				t.Errorf("%s for %s: %v", name, host, err)
			}
		}
		if fi, err := os.Stat(files[name].Key); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("key %s mode %v, %v", files[name].Key, fi.Mode(), err)
		}
	}
	// A second run adds a node under the same CA.
	more, err := WriteDev(dir, []string{"n3"})
	if err != nil {
		t.Fatal(err)
	}
	pair, _ := LoadKeyPair(more["n3"].Cert, more["n3"].Key, nil)
	leaf, _ := x509.ParseCertificate(pair.Certificate().Certificate[0])
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool.CertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Fatalf("n3 is not signed by the first CA: %v", err)
	}
}

func TestWriteDevHostsAreInEveryCertificate(t *testing.T) {
	t.Parallel()
	files, err := WriteDev(t.TempDir(), []string{"limitnode"}, "*.limitnode-peers", "10.1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := LoadPool(files[CAName].Cert, nil)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := LoadKeyPair(files["limitnode"].Cert, files["limitnode"].Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate().Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for host, valid := range map[string]bool{
		"limitnode": true, "limitnode-0.limitnode-peers": true, "10.1.2.3": true, "localhost": true,
		"limitnode-peers": false, "a.b.limitnode-peers": false, "10.1.2.4": false,
	} {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: pool.CertPool(), DNSName: host})
		if valid != (err == nil) {
			t.Errorf("valid for %s: %v, want %v", host, err, valid)
		}
	}
}

func TestLoadNamesTheBadFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files, err := WriteDev(dir, []string{"n1"})
	if err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	other, _ := WriteDev(t.TempDir(), []string{"n1"})
	tests := []struct {
		name     string
		load     func() error
		wantName string
	}{
		{"a missing certificate", func() error { _, err := LoadKeyPair(filepath.Join(dir, "nope.pem"), files["n1"].Key, nil); return err }, "nope.pem"},
		{"a malformed certificate", func() error { _, err := LoadKeyPair(garbage, files["n1"].Key, nil); return err }, "garbage.pem"},
		{"a key of another certificate", func() error { _, err := LoadKeyPair(files["n1"].Cert, other["n1"].Key, nil); return err }, files["n1"].Cert},
		{"a missing CA", func() error { _, err := LoadPool(filepath.Join(dir, "noca.pem"), nil); return err }, "noca.pem"},
		{"a CA file without certificates", func() error { _, err := LoadPool(garbage, nil); return err }, "garbage.pem"},
	}
	for _, tt := range tests {
		err := tt.load()
		if err == nil || !strings.Contains(err.Error(), tt.wantName) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line naming %s", tt.name, err, tt.wantName)
		}
	}
}

// TestKeyPairFollowsItsFilesAndKeepsTheLastGoodOne: a new pair is picked up;
// a key that does not match its certificate is refused, reported, and the
// last good pair stays in use.
func TestKeyPairFollowsItsFilesAndKeepsTheLastGoodOne(t *testing.T) {
	old := checkEvery
	checkEvery = 0
	t.Cleanup(func() { checkEvery = old })
	dir := t.TempDir()
	files, err := WriteDev(dir, []string{"n1"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reported []error
	pair, err := LoadKeyPair(files["n1"].Cert, files["n1"].Key, func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	first := pair.Certificate()

	other, _ := WriteDev(t.TempDir(), []string{"n1"})
	copyFile(t, other["n1"].Key, files["n1"].Key) // only the key: it no longer matches
	if got := pair.Certificate(); got != first {
		t.Fatal("a mismatched key replaced the good pair")
	}
	mu.Lock()
	if len(reported) == 0 {
		t.Error("the bad reload was not reported")
	}
	mu.Unlock()

	copyFile(t, other["n1"].Cert, files["n1"].Cert) // now the pair matches again
	testenv.WaitFor(t, "the new pair to be picked up", func() bool { return pair.Certificate() != first })
	if _, err := tls.X509KeyPair(readFile(t, other["n1"].Cert), readFile(t, other["n1"].Key)); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// copyFile replaces dst with src's bytes and a later modification time.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	if err := writeFile(dst, readFile(t, src), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Duration(len(dst)) * time.Millisecond)
	if err := os.Chtimes(dst, later, later); err != nil {
		t.Fatal(err)
	}
}
