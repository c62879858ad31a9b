package httpapi

import (
	"context"
	"log"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// MaxHeaderBytes bounds a request's header block: the request line, the
// header lines and the empty line that ends them (over HTTP/2, the header
// list as HTTP/2 counts it). A larger one is refused with 431.
const MaxHeaderBytes = 16 << 10

// headerSlack is what net/http reads past http.Server.MaxHeaderBytes before
// it refuses a header block (room for the bufio buffer it reads through),
// taken off so that MaxHeaderBytes is the bound a client meets.
const headerSlack = 4 << 10

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
		Handler:           handler,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    MaxHeaderBytes - headerSlack,
	}
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
