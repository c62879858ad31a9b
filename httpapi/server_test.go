package httpapi

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// startServer serves the API on 127.0.0.1 with short timeouts.
func startServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := ServerTimeouts{ReadHeader: 300 * time.Millisecond, Read: 500 * time.Millisecond, Write: time.Second, Idle: time.Second}.NewServer("", newTestAPI(newFake()))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestSlowAndHostileClients: a client that sends its headers a byte at a
// time, one whose body never ends, and one that trickles its body are each
// cut off quickly, and the server keeps answering others.
func TestSlowAndHostileClients(t *testing.T) {
	t.Parallel()
	addr := startServer(t)
	tests := []struct {
		name string
		// send writes to the connection until it fails; it runs
		// concurrently with reading the answer.
		send       func(w io.Writer) error
		wantStatus int // 0: the server closes, or answers 400 without reading on
	}{
		{"headers a byte at a time", func(w io.Writer) error {
			if _, err := io.WriteString(w, "POST /v1/allow HTTP/1.1\r\nHost: 127.0.0.1\r\n"); err != nil {
				return err
			}
			for {
				if _, err := io.WriteString(w, "X"); err != nil {
					return err
				}
				time.Sleep(50 * time.Millisecond)
			}
		}, 0},
		{"a body that never ends", func(w io.Writer) error {
			// A JSON string that never closes: the decoder reads on
			// until the body limit.
			if _, err := io.WriteString(w, "POST /v1/allow HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n9\r\n{\"key\":\"a\r\n"); err != nil {
				return err
			}
			chunk := fmt.Sprintf("%x\r\n%s\r\n", 4096, strings.Repeat("a", 4096))
			for {
				if _, err := io.WriteString(w, chunk); err != nil {
					return err
				}
			}
		}, http.StatusRequestEntityTooLarge},
		{"a body that trickles", func(w io.Writer) error {
			if _, err := io.WriteString(w, "POST /v1/allow HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n{"); err != nil {
				return err
			}
			for {
				if _, err := io.WriteString(w, " "); err != nil {
					return err
				}
				time.Sleep(50 * time.Millisecond)
			}
		}, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			go func() { _ = tt.send(conn) }()
			start := time.Now()
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			elapsed := time.Since(start)
			switch {
			case tt.wantStatus == 0 && err == nil && resp.StatusCode != http.StatusBadRequest:
				t.Fatalf("got an answer %d, want the connection closed or a 400", resp.StatusCode)
			case tt.wantStatus == 0 && isTimeout(err):
				t.Fatalf("the server did not cut the client off within 5s")
			case tt.wantStatus != 0 && err != nil:
				t.Fatalf("no answer: %v", err)
			case tt.wantStatus != 0 && resp.StatusCode != tt.wantStatus:
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			t.Logf("cut off after %s", elapsed)
		})
	}
	t.Run("and the server still answers", func(t *testing.T) {
		t.Parallel()
		resp, err := http.Post("http://"+addr+"/v1/allow", "application/json", strings.NewReader(`{"key":"k","limit":{"rate":1}}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestServerErrorsReachTheStructuredLog: net/http's own complaints are slog
// records; a client's failed TLS handshake is debug, anything else warn.
func TestServerErrorsReachTheStructuredLog(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l := ErrorLog(logger)
	l.Printf("http: TLS handshake error from 127.0.0.1:5555: EOF")
	l.Printf("http: Accept error: too many open files; retrying in 5ms")
	out := buf.String()
	for _, want := range []string{`level=DEBUG msg="http: TLS handshake error from 127.0.0.1:5555: EOF" component=http`, `level=WARN msg="http: Accept error: too many open files; retrying in 5ms" component=http`} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %s:\n%s", want, out)
		}
	}
}

// TestTheHeaderBlockIsBoundedAsDocumented sends header blocks (request line,
// header lines and the empty line that ends them) of exactly MaxHeaderBytes
// and of one byte more: the first is answered, the second refused with 431.
// Over HTTP/2 (HTTPS), whose header list counts each field's name and value
// plus 32 bytes, a list of exactly MaxHeaderBytes is answered and one byte
// more refused: it used to be refused from about 12.3 KB on, the bound of
// HTTP/1.1 less the slack net/http reads past it.
func TestTheHeaderBlockIsBoundedAsDocumented(t *testing.T) {
	t.Parallel()
	addr := startServer(t)
	for _, tt := range []struct {
		size int
		want int
	}{{MaxHeaderBytes, http.StatusOK}, {MaxHeaderBytes + 1, http.StatusRequestHeaderFieldsTooLarge}} {
		head := "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: "
		const tail = "\r\n\r\n"
		block := head + strings.Repeat("a", tt.size-len(head)-len(tail)) + tail
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(conn, block); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		conn.Close()
		if err != nil {
			t.Fatalf("a header block of %d bytes: %v", len(block), err)
		}
		if resp.StatusCode != tt.want {
			t.Fatalf("a header block of %d bytes: %d, want %d", len(block), resp.StatusCode, tt.want)
		}
	}

	srv := httptest.NewUnstartedServer(nil)
	srv.Config = NewServer("", newTestAPI(newFake()))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	// The fields the client sends, as HTTP/2 counts them, but the pad's value.
	const perField = 32
	fields := map[string]string{":method": "GET", ":scheme": "https", ":authority": u.Host, ":path": "/healthz",
		"user-agent": "t", "accept-encoding": "identity", "x-pad": ""}
	listed := 0
	for name, value := range fields {
		listed += len(name) + len(value) + perField
	}
	for _, tt := range []struct {
		size int
		ok   bool
	}{{MaxHeaderBytes, true}, {MaxHeaderBytes + 1, false}} {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/healthz", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("User-Agent", "t")
		req.Header.Set("Accept-Encoding", "identity")
		req.Header.Set("X-Pad", strings.Repeat("a", tt.size-listed))
		resp, err := srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.ProtoMajor != 2 {
				t.Fatalf("the client spoke %s, want HTTP/2", resp.Proto)
			}
		}
		if ok := err == nil && resp.StatusCode == http.StatusOK; ok != tt.ok {
			t.Fatalf("an HTTP/2 header list of %d bytes: %v %v, want answered %v", tt.size, resp, err, tt.ok)
		}
	}
}
