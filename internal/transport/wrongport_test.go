package transport

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/certs"
	"github.com/limitnode/limitnode/internal/testenv"
)

// TestAnHTTPRequestOnTheRaftPortIsAnsweredInHTTP: an HTTP client sent to
// the Raft port (plain, or with mutual TLS on) gets a 421 whose JSON body
// (code wrong_port) says it reached the Raft port and wants the HTTP
// address, not a reset connection; the node logs it, and still serves its
// own protocol.
func TestAnHTTPRequestOnTheRaftPortIsAnsweredInHTTP(t *testing.T) {
	t.Parallel()
	ca, err := certs.NewDevCA()
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	nodeTLS := &TLS{Certificate: func() *tls.Certificate { return cert }, CAs: ca.Pool}
	for _, tt := range []struct {
		name string
		tls  *TLS
	}{{"plain", nil}, {"mutual TLS", nodeTLS}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			logs := &lockedBuffer{}
			m := NewMux(ln, tt.tls, nil, slog.New(slog.NewTextHandler(logs, nil)), testProtocol)
			defer m.Close()
			go func() {
				for {
					c, err := m.Listener(testProtocol).Accept()
					if err != nil {
						return
					}
					c.Close()
				}
			}()
			addr := ln.Addr().String()
			hc := &http.Client{Timeout: 5 * time.Second}
			for _, req := range []struct{ method, body string }{
				{http.MethodGet, ""},
				{http.MethodPost, `{"id":"n4","raft_addr":"127.0.0.1:1"}` + strings.Repeat(" ", 8<<10)},
			} {
				r, err := http.NewRequest(req.method, "http://"+addr+"/v1/cluster/join", strings.NewReader(req.body))
				if err != nil {
					t.Fatal(err)
				}
				resp, err := hc.Do(r)
				if err != nil {
					t.Fatalf("%s to the Raft port: %v, want an HTTP answer", req.method, err)
				}
				data, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var body struct{ Error, Code string }
				if err := json.Unmarshal(data, &body); err != nil || resp.StatusCode != http.StatusMisdirectedRequest || body.Code != WrongPortCode ||
					!strings.Contains(body.Error, "Raft port") || !strings.Contains(body.Error, "HTTP address") {
					t.Fatalf("%s to the Raft port: %d %s (%v)", req.method, resp.StatusCode, data, err)
				}
			}
			testenv.WaitFor(t, "the node to log the misdirected request", func() bool { return strings.Contains(logs.String(), "answered an HTTP request on the raft port") })
			conn, err := Dialer{TLS: tt.tls}.Open(addr, testProtocol, time.Second)
			if err != nil {
				t.Fatalf("the node's own protocol after an HTTP request: %v", err)
			}
			conn.Close()
		})
	}
}

func TestStartsWithMethod(t *testing.T) {
	t.Parallel()
	tests := []struct {
		head string
		want bool
	}{
		{"GET /", true}, {"POST ", true}, {"DELET", true}, {"OPTIO", true}, {"G", true}, {"PUT *", true},
		{"\x16\x03\x01\x02\x00", false}, // a TLS ClientHello
		{"Zzz", false}, {"GETX /", true}, {"GETTING", true}, {"GETTINGS", false}, {"GET x", false}, {"R", true},
	}
	for _, tt := range tests {
		if got := startsWithMethod([]byte(tt.head)); got != tt.want {
			t.Errorf("startsWithMethod(%q) = %v, want %v", tt.head, got, tt.want)
		}
	}
}

func TestIsRequestLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line string
		want bool
	}{
		{"POST /v1/cluster/join HTTP/1.1\r\n", true},
		{"GET / HTTP/1.0\n", true},
		{"OPTIONS * HTTP/1.1\r\n", true},
		{"PRI * HTTP/2.0\r\n", false},
		{"GET /\r\n", false},
		{"get / HTTP/1.1\r\n", false},
		{"SUBSCRIBE / HTTP/1.1\r\n", false},
		{"R\x00\x01hello\n", false},
	}
	for _, tt := range tests {
		if got := isRequestLine([]byte(tt.line)); got != tt.want {
			t.Errorf("isRequestLine(%q) = %v, want %v", tt.line, got, tt.want)
		}
	}
}
