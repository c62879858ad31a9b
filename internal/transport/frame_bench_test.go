package transport

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// BenchmarkReadFrameWithALongString decodes a frame holding one
// long string: the time must grow linearly with its size (decoding from the
// stream grew it in 4 KiB steps, quadratically).
func BenchmarkReadFrameWithALongString(b *testing.B) {
	for _, size := range []int{1 << 20, 4 << 20, 8 << 20} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			var frame bytes.Buffer
			w := NewConn(&bufConn{Buffer: &frame})
			if err := w.Write(&echoRequest{Values: []string{strings.Repeat("r", size)}}); err != nil {
				b.Fatal(err)
			}
			data := frame.Bytes()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				r := NewConn(&bufConn{Buffer: bytes.NewBuffer(data)})
				var req echoRequest
				if err := r.Read(&req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// bufConn is a net.Conn over a buffer, for frames read and written in
// memory.
type bufConn struct {
	net.Conn
	*bytes.Buffer
}

func (c *bufConn) Read(p []byte) (int, error)      { return c.Buffer.Read(p) }
func (c *bufConn) Write(p []byte) (int, error)     { return c.Buffer.Write(p) }
func (c *bufConn) SetReadDeadline(time.Time) error { return nil }
