package httpapi

import (
	"context"
	"io"
	"log"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// MaxHeaderBytes bounds a request's header block: the request line, the
// header lines and the empty line that ends them (over HTTP/2, the header
// list as HTTP/2 counts it: each field's name and value plus 32 bytes). A
// larger one is refused with 431.
const MaxHeaderBytes = 16 << 10

// h2HeaderSlack is what net/http adds to http.Server.MaxHeaderBytes for
// HTTP/2's SETTINGS_MAX_HEADER_LIST_SIZE (32 bytes for each of ten
// fields), taken off so that MaxHeaderBytes is the bound an HTTP/2 client
// meets. Over HTTP/1.1 net/http reads 4 KiB past the server's
// MaxHeaderBytes before it refuses a block; boundHeaders refuses what lies
// between.
const h2HeaderSlack = 10 * 32

// ServerTimeouts are the limits an http.Server facing many clients needs:
// a client that sends its headers slowly, never finishes its body or idles
// on a connection is cut off.
type ServerTimeouts struct {
	ReadHeader time.Duration
	Read       time.Duration
	Write      time.Duration
	Idle       time.Duration
}

// DefaultServerTimeouts returns the timeouts NewServer uses: read header
// 5s, read 10s, write 15s (the cluster's 5s request timeout plus room),
// idle 2m.
func DefaultServerTimeouts() ServerTimeouts {
	return ServerTimeouts{ReadHeader: 5 * time.Second, Read: 10 * time.Second, Write: 15 * time.Second, Idle: 2 * time.Minute}
}

// NewServer returns an http.Server for handler on addr (as http.Server's
// Addr: "127.0.0.1:7070"; "" means ":http", every interface) with
// DefaultServerTimeouts and MaxHeaderBytes.
func NewServer(addr string, handler http.Handler) *http.Server {
	return DefaultServerTimeouts().NewServer(addr, handler)
}

// NewServer returns an http.Server for handler on addr with these timeouts
// and MaxHeaderBytes.
func (t ServerTimeouts) NewServer(addr string, handler http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           boundHeaders(handler),
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    MaxHeaderBytes - h2HeaderSlack,
	}
}

// boundHeaders answers 431, as net/http does, an HTTP/1 request whose
// header block is over MaxHeaderBytes, which net/http reads whole when it
// is within 4 KiB past its own bound. HTTP/2 requests net/http bounds
// itself.
func boundHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 1 && headerBlockBytes(r) > MaxHeaderBytes {
			w.Header().Set("Connection", "close")
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusRequestHeaderFieldsTooLarge)
			_, _ = io.WriteString(w, "431 Request Header Fields Too Large")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// headerBlockBytes is the length of r's header block as HTTP/1.1 writes
// it: the request line, "Name: value\r\n" for each header (Host too, which
// net/http keeps apart) and the empty line.
func headerBlockBytes(r *http.Request) int {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + len("\r\n")
	if r.Host != "" {
		n += len("Host: ") + len(r.Host) + len("\r\n")
	}
	for name, values := range r.Header {
		for _, v := range values {
			n += len(name) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n + len("\r\n")
}

// extendWriteDeadline gives a response that waits on purpose (a held
// reservation, a queued lease request) its wait on top of the default write
// timeout, counted from now, so that the server does not cut it off. A
// writer that cannot take deadlines keeps the one it has.
func extendWriteDeadline(w http.ResponseWriter, wait time.Duration) {
	if wait > 0 {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + DefaultServerTimeouts().Write))
	}
}

// ErrorLog is an http.Server's ErrorLog that writes through logger, so that
// what net/http reports reaches the node's structured log: a client's
// failed TLS handshake (a scanner, a client without the CA) at debug, as it
// says nothing about the node, anything else at warn.
func ErrorLog(logger *slog.Logger) *log.Logger {
	return log.New(serverLogWriter{logger}, "", 0)
}

type serverLogWriter struct{ logger *slog.Logger }

func (w serverLogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := slog.LevelWarn
	if strings.Contains(msg, "TLS handshake error") {
		level = slog.LevelDebug
	}
	w.logger.Log(context.Background(), level, msg, "component", "http")
	return len(p), nil
}
