package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// tokenBucketLua is a token bucket in Lua, the script a Redis user would
// run: KEYS[1] = bucket; ARGV = rate (tokens/s), capacity,
// now (s), requested.
const tokenBucketLua = `
local key       = KEYS[1]
local rate      = tonumber(ARGV[1])
local capacity  = tonumber(ARGV[2])
local now       = tonumber(ARGV[3])
local requested = tonumber(ARGV[4])
local bucket    = redis.call("HMGET", key, "tokens", "ts")
local tokens    = tonumber(bucket[1]) or capacity
local ts        = tonumber(bucket[2]) or now
local elapsed   = math.max(0, now - ts)
tokens          = math.min(capacity, tokens + elapsed * rate)
local allowed   = tokens >= requested
if allowed then tokens = tokens - requested end
redis.call("HSET", key, "tokens", tokens, "ts", now)
redis.call("EXPIRE", key, math.ceil(capacity / rate) * 2)
local retry = allowed and 0 or math.ceil((requested - tokens) / rate)
return { allowed and 1 or 0, retry }
`

// redisServer is a redis-server process started for the run.
type redisServer struct {
	addr string
	cmd  *exec.Cmd
	dir  string
	sha  string
}

// startRedis starts the redis-server binary on a free loopback port,
// without persistence or with an append-only file fsynced on every write.
func startRedis(binary string, aof bool) (*redisServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "limitbench-redis-")
	if err != nil {
		return nil, err
	}
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--dir", dir, "--protected-mode", "no"}
	if aof {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	cmd := exec.Command(binary, args...)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	s := &redisServer{addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd, dir: dir}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := dialRedis(s.addr)
		if err == nil {
			reply, err := c.call("SCRIPT", "LOAD", tokenBucketLua)
			c.close()
			if err != nil {
				s.stop()
				return nil, fmt.Errorf("load the script: %w", err)
			}
			s.sha = reply.(string)
			return s, nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("redis-server did not answer: %w", err)
		}
	}
}

// freePort returns a loopback port that was free a moment ago, for a
// program that takes its port as an argument and cannot report one it
// picked itself.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (s *redisServer) stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	os.RemoveAll(s.dir)
}

// redisConn is a minimal RESP client: enough for SCRIPT LOAD and EVALSHA.
type redisConn struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
}

func dialRedis(addr string) (*redisConn, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	return &redisConn{conn: conn, r: bufio.NewReader(conn), w: bufio.NewWriter(conn)}, nil
}

func (c *redisConn) close() { c.conn.Close() }

func (c *redisConn) call(args ...string) (any, error) {
	fmt.Fprintf(c.w, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(c.w, "$%d\r\n%s\r\n", len(a), a)
	}
	if err := c.w.Flush(); err != nil {
		return nil, err
	}
	return c.read()
}

func (c *redisConn) read() (any, error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 {
		return nil, errors.New("redis: short reply")
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, errors.New("redis: " + body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, err
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = c.read(); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("redis: unexpected reply %q", line)
}

type redisTarget struct {
	env   *environment
	label string
	srv   *redisServer
	mu    sync.Mutex
	conns map[int]*redisConn
	// flood asks for the flood's hot keys, where a denial is an answer.
	flood bool
}

func (t *redisTarget) name() string { return t.label }

func (t *redisTarget) servers() []serverProcess {
	return []serverProcess{{Name: "redis-server", PID: t.srv.cmd.Process.Pid}}
}

func (t *redisTarget) where() string { return whereProcesses }

func (t *redisTarget) do(_ context.Context, caller, seq int) (int, error) {
	t.mu.Lock()
	c := t.conns[caller]
	t.mu.Unlock()
	if c == nil {
		var err error
		if c, err = dialRedis(t.srv.addr); err != nil {
			return 0, err
		}
		t.mu.Lock()
		t.conns[caller] = c
		t.mu.Unlock()
		t.env.closers = append(t.env.closers, c.close)
	}
	now := strconv.FormatFloat(float64(time.Now().UnixNano())/1e9, 'f', 6, 64)
	key, rate := t.env.key(caller, seq), "1000000000"
	if t.flood {
		key, rate = floodKey(caller), strconv.Itoa(floodRate)
	}
	reply, err := c.call("EVALSHA", t.srv.sha, "1", key, rate, rate, now, "1")
	if err != nil {
		return 0, err
	}
	r, ok := reply.([]any)
	switch {
	case !ok || len(r) != 2:
		return 0, fmt.Errorf("redis: odd reply %v", reply)
	case r[0] != int64(1) && !t.flood:
		return 0, fmt.Errorf("redis: denied")
	}
	return 1, nil
}
