package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// checkEvery is how often, at most, the files are looked at again: a
// handshake costs no stat in between.
var checkEvery = time.Second

// fileStamp identifies a version of a file without reading it.
type fileStamp struct {
	modTime time.Time
	size    int64
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{fi.ModTime(), fi.Size()}, nil
}

// watched holds what was loaded from some files, and reloads it when any of
// them changes. load turns the files' bytes into the value.
type watched[T any] struct {
	paths   []string
	load    func() (T, error)
	onError func(error)

	mu        sync.Mutex
	value     T
	stamps    []fileStamp
	checkedAt time.Time
}

func newWatched[T any](paths []string, load func() (T, error), onError func(error)) (*watched[T], error) {
	w := &watched[T]{paths: paths, load: load, onError: onError}
	stamps, err := w.stampAll()
	if err != nil {
		return nil, err
	}
	if w.value, err = load(); err != nil {
		return nil, err
	}
	w.stamps, w.checkedAt = stamps, time.Now()
	return w, nil
}

func (w *watched[T]) stampAll() ([]fileStamp, error) {
	stamps := make([]fileStamp, len(w.paths))
	for i, p := range w.paths {
		s, err := stampOf(p)
		if err != nil {
			return nil, err
		}
		stamps[i] = s
	}
	return stamps, nil
}

// current returns the value, re-reading the files first if one changed
// since they were last looked at (at most every checkEvery). A reload that
// fails keeps the last good value and reports the error.
func (w *watched[T]) current() T {
	w.mu.Lock()
	defer w.mu.Unlock()
	if time.Since(w.checkedAt) < checkEvery {
		return w.value
	}
	w.checkedAt = time.Now()
	stamps, err := w.stampAll()
	if err != nil {
		w.onError(err)
		return w.value
	}
	if equalStamps(stamps, w.stamps) {
		return w.value
	}
	v, err := w.load()
	if err != nil {
		w.onError(err)
		return w.value
	}
	w.value, w.stamps = v, stamps
	return w.value
}

func equalStamps(a, b []fileStamp) bool {
	for i := range a {
		if !a[i].modTime.Equal(b[i].modTime) || a[i].size != b[i].size {
			return false
		}
	}
	return true
}

// KeyPair is a certificate and its private key in two PEM files, re-read
// when either changes.
type KeyPair struct{ w *watched[*tls.Certificate] }

// LoadKeyPair reads a certificate (with its chain) and the matching private
// key. onError, if not nil, is told of a later reload that failed.
func LoadKeyPair(certFile, keyFile string, onError func(error)) (*KeyPair, error) {
	load := func() (*tls.Certificate, error) {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("certificate %s with key %s: %w", certFile, keyFile, err)
		}
		return &cert, nil
	}
	w, err := newWatched([]string{certFile, keyFile}, load, orIgnore(onError))
	if err != nil {
		return nil, fileError(err)
	}
	return &KeyPair{w}, nil
}

// Certificate returns the current certificate.
func (k *KeyPair) Certificate() *tls.Certificate { return k.w.current() }

// GetCertificate is the current certificate as tls.Config.GetCertificate
// wants it.
func (k *KeyPair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return k.Certificate(), nil
}

// GetClientCertificate is the current certificate as
// tls.Config.GetClientCertificate wants it.
func (k *KeyPair) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return k.Certificate(), nil
}

// Pool is a CA's certificates from one PEM file, re-read when it changes.
type Pool struct{ w *watched[*x509.CertPool] }

// LoadPool reads the PEM certificates of a CA. onError, if not nil, is told
// of a later reload that failed.
func LoadPool(caFile string, onError func(error)) (*Pool, error) {
	load := func() (*x509.CertPool, error) {
		data, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", caFile)
		}
		return pool, nil
	}
	w, err := newWatched([]string{caFile}, load, orIgnore(onError))
	if err != nil {
		return nil, fileError(err)
	}
	return &Pool{w}, nil
}

// CertPool returns the current pool.
func (p *Pool) CertPool() *x509.CertPool { return p.w.current() }

func orIgnore(onError func(error)) func(error) {
	if onError == nil {
		return func(error) {}
	}
	return onError
}

// fileError words a failure to read a file at start as one line naming it.
func fileError(err error) error {
	var pathErr *os.PathError
	if errors.As(err, &pathErr) {
		return fmt.Errorf("%s: %w", pathErr.Path, pathErr.Err)
	}
	return err
}
