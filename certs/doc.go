// Package certs is limitnode's TLS material on disk: it loads a certificate
// and key, or a CA's certificates, from PEM files and re-reads them when the
// files change, so a node rotates its certificates without a restart; and it
// writes a development CA with one certificate per node, for local clusters
// and tests (production uses the organisation's own CA).
//
// A file that turns bad while a node runs (half written, a key that does not
// match its certificate) is refused: the last good material stays in use and
// the problem is reported to the OnError callback, so a rotation in progress
// never leaves the node without a certificate.
package certs
