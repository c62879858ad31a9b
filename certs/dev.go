package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// DevValidity is how long WriteDev's certificates are valid.
const DevValidity = 5 * 365 * 24 * time.Hour

// Files names the PEM files of one certificate and its key.
type Files struct {
	Cert string
	Key  string
}

// DevFiles are the paths WriteDev uses in dir: the CA's, and one pair per
// node name.
func DevFiles(dir, name string) Files {
	return Files{Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem")}
}

// CAName is the name of the CA's files in WriteDev's directory: ca.pem and
// ca-key.pem.
const CAName = "ca"

// WriteDev writes a development CA to dir (or reuses the one there) and a
// certificate and key per name, each valid for 127.0.0.1, ::1, localhost,
// the name itself and every one of hosts (DNS names, which may be wildcards
// such as *.limitnode-peers, or IP addresses), for serving and for client
// authentication alike: what a node needs on both of its ports. It returns
// the files it wrote. Keys are written readable by the owner only.
func WriteDev(dir string, names []string, hosts ...string) (map[string]Files, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	caFiles := DevFiles(dir, CAName)
	ca, err := loadDevCA(caFiles)
	if errors.Is(err, fs.ErrNotExist) {
		if ca, err = NewDevCA(); err == nil {
			err = writePair(caFiles, ca.cert.Raw, ca.key)
		}
	}
	if err != nil {
		return nil, err
	}
	out := map[string]Files{CAName: caFiles}
	for _, name := range names {
		if name == "" || name == CAName || filepath.Base(name) != name {
			return nil, fmt.Errorf("certs: %q cannot name a certificate file", name)
		}
		der, key, err := ca.issue(name, hosts)
		if err != nil {
			return nil, err
		}
		f := DevFiles(dir, name)
		if err := writePair(f, der, key); err != nil {
			return nil, err
		}
		out[name] = f
	}
	return out, nil
}

// DevCA is a development certificate authority held in memory.
type DevCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewDevCA makes a new development CA.
func NewDevCA() (*DevCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "limitnode development CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(DevValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	return &DevCA{cert: cert, key: key}, nil
}

func loadDevCA(f Files) (*DevCA, error) {
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("certs: the CA in %s: %w", f.Cert, err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("certs: %s: %w", f.Cert, err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok || !cert.IsCA {
		return nil, fmt.Errorf("certs: %s is not a CA this command made", f.Cert)
	}
	return &DevCA{cert: cert, key: key}, nil
}

// Pool returns a pool holding the CA's certificate.
func (ca *DevCA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return pool
}

// Issue makes a certificate and key for name, valid for 127.0.0.1, ::1,
// localhost and the name, for servers and clients.
func (ca *DevCA) Issue(name string) (*tls.Certificate, error) {
	der, key, err := ca.issue(name, nil)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

func (ca *DevCA) issue(name string, hosts []string) ([]byte, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(DevValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{"localhost", name},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if ip := net.ParseIP(name); ip != nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		tmpl.DNSNames = tmpl.DNSNames[:1]
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %w", err)
	}
	return der, key, nil
}

func writePair(f Files, der []byte, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	if err := writeFile(f.Key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return writeFile(f.Cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// writeFile replaces path whole (a temporary file renamed over it), so a
// node re-reading it never sees half of it.
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	return nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)) // crypto/rand does not fail
	return n
}
