package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/testcluster"
	"go.yaml.in/yaml/v3"
)

// The forward-auth endpoint behind real proxies: each test writes the
// proxy's configuration as docs/proxies.md gives it, starts the proxy on
// 127.0.0.1 in front of a test upstream, and asks through it.

// proxiedCluster is a 3-node cluster with a policy of three requests an
// hour per client address, asked through a follower, and an upstream.
type proxiedCluster struct {
	follower string // host:port of a follower's HTTP API
	upstream string // host:port of the upstream
}

func newProxiedCluster(t *testing.T) proxiedCluster {
	t.Helper()
	c := testcluster.Start(t, 3)
	c.WaitLeader()
	follower := c.Followers()[0]
	if strings.HasPrefix(follower.URL(), "https://") {
		t.Skip("LIMITNODE_TEST_SECURE: the proxies here talk plain HTTP without a token")
	}
	_, err := client.New(nil, follower.HTTPAddr).PutPolicy(context.Background(), "per-ip", client.Policy{
		Limit: &client.Limit{Rate: 3, Period: time.Hour}, KeyTemplate: "ip:{ip}"})
	if err != nil {
		t.Fatal(err)
	}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "upstream") }))
	t.Cleanup(upstream.Close)
	return proxiedCluster{follower: follower.HTTPAddr, upstream: strings.TrimPrefix(upstream.URL, "http://")}
}

// startProxy runs the command, in a process group of its own (nginx's
// workers outlive a killed master), until the test ends, and returns what
// it printed so far as it prints it.
func startProxy(t *testing.T, cmd *exec.Cmd) *testenv.SyncBuffer {
	t.Helper()
	out := &testenv.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	return out
}

// startNginx runs nginx with the page's configuration on a port the test
// binds and hands over (nginx takes listening sockets from the NGINX
// variable, as in its binary upgrade, and uses the one whose address a
// listen directive names), and returns that address once nginx serves.
func startNginx(t *testing.T, bin string, pc proxiedCluster) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close() // nginx holds its own descriptor of it
	socket, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer socket.Close()
	dir := t.TempDir()
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(nginxConfig(dir, ln.Addr().String(), pc.follower, pc.upstream)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", conf, "-g", "daemon off;")
	cmd.ExtraFiles = []*os.File{socket} // its descriptor 3
	cmd.Env = append(os.Environ(), "NGINX=3;")
	out := startProxy(t, cmd)
	testenv.WaitFor(t, "nginx to serve on the port handed over", func() bool {
		log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		said := out.String() + string(log)
		if strings.Contains(said, "[emerg]") {
			t.Fatalf("nginx did not start:\n%s", said)
		}
		return strings.Contains(said, `using inherited sockets from "3;"`) && strings.Contains(said, "start worker process")
	})
	return ln.Addr().String()
}

// caddyListens is the line of Caddy's log that names the port it picked
// for port 0.
var caddyListens = regexp.MustCompile(`"msg":"port 0 listener".*"actual_address":"[^"]*:(\d+)"`)

// startCaddy runs Caddy with the page's configuration on port 0 and
// returns the address it serves on, as its log names it.
func startCaddy(t *testing.T, bin string, pc proxiedCluster) string {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(conf, []byte(caddyfile("127.0.0.1:0", pc.follower, pc.upstream)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--config", conf, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	out := startProxy(t, cmd)
	var port []string
	testenv.WaitFor(t, "Caddy to name the port it serves on", func() bool {
		port = caddyListens.FindStringSubmatch(out.String())
		return port != nil && strings.Contains(out.String(), `"msg":"serving initial configuration"`)
	})
	return "127.0.0.1:" + port[1]
}

// checkLimitHolds sends five requests through the proxy: three reach the
// upstream, then 429 with Retry-After, also for a request that claims
// another address in X-Forwarded-For. Each comes as a browser sends it
// after a link or a form on another site (Sec-Fetch-Site: cross-site, and
// Origin for a POST): a proxy that copies the client's headers to
// forward-auth (Caddy, Traefik) must not have its asks refused as
// cross-origin.
func checkLimitHolds(t *testing.T, proxy string) {
	t.Helper()
	steps := []struct {
		method, path, forwardedFor string
		want                       int
	}{
		{"GET", "/a", "", 200},
		{"POST", "/b?page=2", "", 200},
		{"GET", "/c", "198.51.100.7", 200},
		{"GET", "/d", "", 429},
		{"POST", "/e", "198.51.100.8", 429},
	}
	for i, s := range steps {
		req, _ := http.NewRequest(s.method, "http://"+proxy+s.path, nil)
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		if s.method == "POST" {
			req.Header.Set("Origin", "https://elsewhere.example")
		}
		if s.forwardedFor != "" {
			req.Header.Set("X-Forwarded-For", s.forwardedFor)
		}
		resp, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("step %d %s: %v", i, s.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != s.want {
			t.Fatalf("step %d %s: %d %s, want %d", i, s.path, resp.StatusCode, body, s.want)
		}
		if s.want == 200 && string(body) != "upstream" {
			t.Fatalf("step %d: body %q did not come from the upstream", i, body)
		}
		if s.want == 429 && resp.Header.Get("Retry-After") == "" {
			t.Fatalf("step %d: 429 without Retry-After: %v", i, resp.Header)
		}
		// The client learns when to come back, not what denied it.
		for name := range resp.Header {
			if strings.HasPrefix(strings.ToLower(name), "x-limitnode-") || http.CanonicalHeaderKey(name) == "Limitnode-Denied-By" {
				t.Fatalf("step %d: the proxy's client got limitnode's %s: %v", i, name, resp.Header)
			}
		}
	}
}

// nginxConfig is the nginx configuration of docs/proxies.md for the given
// addresses.
func nginxConfig(dir, listen, limitnode, upstream string) string {
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;" // the workers must reach the test's files
	}
	return fmt.Sprintf(`%s
worker_processes 1;
error_log %[2]s/error.log notice;
pid %[2]s/nginx.pid;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path %[2]s/body;
  proxy_temp_path %[2]s/proxy;
  fastcgi_temp_path %[2]s/fastcgi;
  uwsgi_temp_path %[2]s/uwsgi;
  scgi_temp_path %[2]s/scgi;
  server {
    listen %[3]s;
%[6]s
    location / {
      proxy_pass http://%[5]s;
    }
  }
}
`, user, dir, listen, limitnode, upstream, nginxLocations(limitnode))
}

// nginxLocations is the part of the page's nginx configuration that asks
// limitnode: it goes in the server block, before the locations it guards.
func nginxLocations(limitnode string) string {
	return strings.ReplaceAll(`    auth_request /_limitnode;
    auth_request_set $limit_retry_after $upstream_http_retry_after;
    error_page 403 = @rate_limited;

    location = /_limitnode {
      internal;
      proxy_pass http://LIMITNODE/v1/forward-auth?policy=per-ip&dim.ip=client_ip&deny_status=403&request_id=header:X-Request-Id;
      proxy_pass_request_body off;
      proxy_pass_request_headers off;
      proxy_set_header X-Forwarded-For $remote_addr;
      proxy_set_header X-Forwarded-Method $request_method;
      proxy_set_header X-Forwarded-Host $host;
      proxy_set_header X-Forwarded-Uri $request_uri;
      proxy_set_header X-Request-Id $request_id;
      proxy_connect_timeout 1s;
      proxy_read_timeout 6s;
    }
    location @rate_limited {
      add_header Retry-After $limit_retry_after always;
      default_type application/json;
      return 429 '{"error":"too many requests","code":"rate_limited"}\n';
    }
`, "LIMITNODE", limitnode)
}

// caddyfile is the Caddy configuration of docs/proxies.md for the given
// addresses.
func caddyfile(listen, limitnode, upstream string) string {
	return fmt.Sprintf(`{
	admin off
	auto_https off
}

http://%s {
	forward_auth %s {
		uri /v1/forward-auth?policy=per-ip&dim.ip=client_ip
		header_up Host {upstream_hostport}
		header_down -Limitnode-Denied-By
	}
	reverse_proxy %s
}
`, listen, limitnode, upstream)
}

// TestForwardAuthThroughRealProxies runs nginx and Caddy, each with the
// configuration of docs/proxies.md, in front of the upstream and a cluster.
func TestForwardAuthThroughRealProxies(t *testing.T) {
	t.Parallel()
	proxies := []struct {
		program string
		start   func(t *testing.T, bin string, pc proxiedCluster) string
	}{
		{"nginx", startNginx},
		{"caddy", startCaddy},
	}
	for _, p := range proxies {
		t.Run(p.program, func(t *testing.T) {
			t.Parallel()
			bin := testenv.NeedProgram(t, p.program)
			pc := newProxiedCluster(t)
			checkLimitHolds(t, p.start(t, bin, pc))
		})
	}
}

// proxiesPage is docs/proxies.md, where users read the configurations.
func proxiesPage(t *testing.T) string {
	t.Helper()
	page, err := os.ReadFile("../docs/proxies.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(page)
}

// TestProxiesPageShowsTheTestedConfigurations: the nginx and Caddy
// configurations of docs/proxies.md are the ones these tests run.
func TestProxiesPageShowsTheTestedConfigurations(t *testing.T) {
	t.Parallel()
	page := proxiesPage(t)
	for name, block := range map[string]string{
		"nginx": nginxLocations("127.0.0.1:7001"),
		"Caddy": caddyfile("127.0.0.1:8480", "127.0.0.1:7001", "127.0.0.1:9000"),
	} {
		if !strings.Contains(page, block) {
			t.Errorf("docs/proxies.md lacks the %s configuration the tests run:\n%s", name, block)
		}
	}
}

// traefikAddress is the forwardAuth address of the Traefik configuration
// of docs/proxies.md, which must parse as YAML.
func traefikAddress(t *testing.T) *url.URL {
	t.Helper()
	for _, block := range strings.Split(proxiesPage(t), "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if !strings.Contains(block, "forwardAuth:") {
			continue
		}
		var conf struct {
			HTTP struct {
				Middlewares map[string]struct {
					ForwardAuth struct {
						Address string `yaml:"address"`
					} `yaml:"forwardAuth"`
				} `yaml:"middlewares"`
			} `yaml:"http"`
		}
		if err := yaml.Unmarshal([]byte(block), &conf); err != nil {
			t.Fatalf("the page's Traefik configuration: %v", err)
		}
		u, err := url.Parse(conf.HTTP.Middlewares["limitnode"].ForwardAuth.Address)
		if err != nil || u.Path != "/v1/forward-auth" {
			t.Fatalf("the page's Traefik forwardAuth address: %v, %v", u, err)
		}
		return u
	}
	t.Fatal("docs/proxies.md has no Traefik configuration")
	return nil
}

// TestForwardAuthAsTraefikAsks sends the request Traefik's ForwardAuth
// middleware sends to the address of the page's configuration (GET, the
// original method, host and URI in X-Forwarded-* headers, the client in
// X-Forwarded-For, its own address as the peer) and finds the key made of
// them.
func TestForwardAuthAsTraefikAsks(t *testing.T) {
	t.Parallel()
	address := traefikAddress(t)
	pc := newProxiedCluster(t)
	_, err := client.New(nil, pc.follower).PutPolicy(context.Background(), "per-route", client.Policy{
		Limit: &client.Limit{Rate: 1, Period: time.Hour}, KeyTemplate: "{ip} {method} {host}{path}"})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(method, uri string) int {
		req, _ := http.NewRequest("GET", "http://"+pc.follower+address.RequestURI(), nil)
		req.Header.Set("X-Forwarded-For", "203.0.113.9")
		req.Header.Set("X-Forwarded-Method", method)
		req.Header.Set("X-Forwarded-Proto", "https")
		req.Header.Set("X-Forwarded-Host", "api.example.com")
		req.Header.Set("X-Forwarded-Uri", uri)
		// Traefik copies the client's headers too: a browser's, here.
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		req.Header.Set("Origin", "https://elsewhere.example")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	steps := []struct {
		method, uri string
		want        int
	}{
		{"POST", "/export", 200},
		{"POST", "/export", 429},
		{"POST", "/export?x=1", 429}, // the path, not the query, is the key
		{"POST", "/./export/", 429},  // cleaned
		{"GET", "/export", 200},      // another method, another key
		{"POST", "/import", 200},
	}
	for i, s := range steps {
		if got := ask(s.method, s.uri); got != s.want {
			t.Fatalf("step %d %s %s: %d, want %d", i, s.method, s.uri, got, s.want)
		}
	}
}
