package transport

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/limitnode/limitnode/internal/msgpack"
)

// Messages are frames: a 4-byte big-endian length, then that many bytes of
// msgpack. The length is checked before anything is read or allocated, and
// the body is decoded from memory, which costs time linear in its size
// (decoding from the stream grew long strings in steps).

// MaxFrameBytes bounds one message. A larger frame is refused and its
// connection closed.
const MaxFrameBytes = 16 << 20

// FrameTimeout bounds how long the body of a frame, once announced, may
// take to arrive: a peer cannot hold a connection open by sending a frame
// slowly.
const FrameTimeout = 10 * time.Second

// Conn carries framed messages over one connection.
type Conn struct {
	conn net.Conn
	r    *bufio.Reader
	bw   *bufio.Writer
	buf  []byte
}

// NewConn frames messages over conn.
func NewConn(conn net.Conn) *Conn {
	return &Conn{conn: conn, r: bufio.NewReaderSize(conn, 32<<10), bw: bufio.NewWriterSize(conn, 32<<10)}
}

// NetConn is the connection under c.
func (c *Conn) NetConn() net.Conn { return c.conn }

// Close closes the connection.
func (c *Conn) Close() error { return c.conn.Close() }

// Write sends v as one frame.
func (c *Conn) Write(v any) error {
	c.buf = c.buf[:0]
	if err := codec.NewEncoderBytes(&c.buf, msgpack.Handle).Encode(v); err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	if len(c.buf) > MaxFrameBytes {
		return fmt.Errorf("a message of %d bytes is over the frame limit of %d", len(c.buf), MaxFrameBytes)
	}
	var header [4]byte
	binary.BigEndian.PutUint32(header[:], uint32(len(c.buf)))
	if _, err := c.bw.Write(header[:]); err != nil {
		return err
	}
	if _, err := c.bw.Write(c.buf); err != nil {
		return err
	}
	return c.bw.Flush()
}

// Read receives one frame into v. It waits for the frame's length as long
// as the connection's deadline allows, then gives the body FrameTimeout.
func (c *Conn) Read(v any) error {
	var header [4]byte
	if _, err := io.ReadFull(c.r, header[:]); err != nil {
		return err
	}
	size := binary.BigEndian.Uint32(header[:])
	if size > MaxFrameBytes {
		return fmt.Errorf("a frame of %d bytes is over the limit of %d", size, MaxFrameBytes)
	}
	_ = c.conn.SetReadDeadline(time.Now().Add(FrameTimeout))
	defer c.conn.SetReadDeadline(time.Time{})
	body := make([]byte, size)
	if _, err := io.ReadFull(c.r, body); err != nil {
		return err
	}
	dec := codec.NewDecoderBytes(body, msgpack.Handle)
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if n := dec.NumBytesRead(); n != len(body) {
		return fmt.Errorf("%d bytes after the message", len(body)-n)
	}
	return nil
}
