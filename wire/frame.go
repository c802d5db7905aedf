// Package wire is mortar's client ↔ brick protocol: length-prefixed frames
// carrying requests and responses matched by id, so that any number of
// operations are in flight on one TCP connection at once (pipelined and
// multiplexed). Data travels as the raw tail of a frame — written with
// writev, read straight into the caller's buffer — so the data path costs
// one header per operation and no copies beyond the socket.
//
// A frame is a 24-byte header followed by Len bytes of payload:
//
//	offset 0  u32 Len     payload length (≤ MaxPayload)
//	       4  u8  Kind    Request, Response, Cancel, Ping, Pong, Notify, Recall, RecallDir
//	       5  u8  Op      operation (requests and responses)
//	       6  u16 Flags   FlagNoReply, FlagKeepUndo (requests), else zero
//	       8  u64 ID      request id, echoed in the response
//	      16  u32 Errno   0 or the operation's errno (responses)
//	      20  u32 -       reserved, zero
//
// Integers are little-endian. The payload encodings are in codec.go and
// msgs.go. A connection opens with Magic and a Handshake request naming the
// volume and brick, which the brick answers with a challenge, and a second
// Handshake answering it with the volume's secret (msgs.go); a frame that
// does not parse closes the connection. A client that sent OpWatch also
// receives Notify frames, unasked, naming what other clients changed
// (change.go).
package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// HeaderSize is the size of a frame header.
const HeaderSize = 24

// MaxIO is the largest read or write one request carries.
const MaxIO = 8 << 20

// MaxPayload is the largest payload a frame may carry: the protocol's
// ceiling, which a server may lower (brick.Limits) but never raise. A
// header claiming more is refused by ParseHeader before anything of its
// payload is read or allocated.
const MaxPayload = MaxIO + 64<<10

// ErrFrameTooLarge is returned (wrapped) for a header claiming a payload
// larger than MaxPayload.
var ErrFrameTooLarge = errors.New("wire: frame too large")

// Frame kinds.
const (
	KindRequest  = 1
	KindResponse = 2
	KindCancel   = 3 // ID names the request to cancel
	KindPing     = 4
	KindPong     = 5
	KindNotify   = 6 // brick → client: changes others made (EncodeChanges); ID 0
	// KindRecall: brick → client: return lock lease ID (SetlkLease); the
	// payload is the u64 handle of the file it is held through.
	KindRecall = 7
	// KindRecallDir: brick → client: return directory lease ID
	// (MkdirLease); no payload.
	KindRecallDir = 8
)

// FlagNoReply, on a request, asks for no answer: the client waits for
// none and the brick sends none (a release that nothing waits on).
const FlagNoReply = 1

// FlagKeepUndo, on a Write or WriteGap request (version 12), asks a
// disperse brick to keep what the write replaces (layer.Txn.KeepUndo;
// Request.KeepUndo).
const FlagKeepUndo = 2

// Header is a decoded frame header.
type Header struct {
	Len   uint32
	Kind  uint8
	Op    uint8
	Flags uint16
	ID    uint64
	Errno uint32
}

// Put encodes h into b, which must hold HeaderSize bytes.
func (h *Header) Put(b []byte) {
	binary.LittleEndian.PutUint32(b[0:], h.Len)
	b[4] = h.Kind
	b[5] = h.Op
	binary.LittleEndian.PutUint16(b[6:], h.Flags)
	binary.LittleEndian.PutUint64(b[8:], h.ID)
	binary.LittleEndian.PutUint32(b[16:], h.Errno)
	binary.LittleEndian.PutUint32(b[20:], 0)
}

// ParseHeader decodes and checks a header.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, ErrShort
	}
	h := Header{
		Len:   binary.LittleEndian.Uint32(b[0:]),
		Kind:  b[4],
		Op:    b[5],
		Flags: binary.LittleEndian.Uint16(b[6:]),
		ID:    binary.LittleEndian.Uint64(b[8:]),
		Errno: binary.LittleEndian.Uint32(b[16:]),
	}
	if h.Len > MaxPayload {
		return h, fmt.Errorf("%w: %d-byte payload exceeds the %d-byte limit", ErrFrameTooLarge, h.Len, MaxPayload)
	}
	if h.Kind < KindRequest || h.Kind > KindRecallDir {
		return h, fmt.Errorf("wire: unknown frame kind %d", h.Kind)
	}
	flags := uint16(0) // the flags a kind may carry
	if h.Kind == KindRequest {
		flags = FlagNoReply | FlagKeepUndo
	}
	if h.Flags&^flags != 0 || binary.LittleEndian.Uint32(b[20:]) != 0 {
		return h, fmt.Errorf("wire: reserved header bits set")
	}
	return h, nil
}

// ReadHeader reads and checks one frame header from r.
func ReadHeader(r io.Reader, buf *[HeaderSize]byte) (Header, error) {
	if _, err := io.ReadFull(r, buf[:]); err != nil {
		return Header{}, err
	}
	return ParseHeader(buf[:])
}

// bigPart is the size from which a payload part bypasses the write buffer.
const bigPart = 32 << 10

// Writer sends frames on a connection from many goroutines. Frames are
// written whole, one at a time; small frames queued behind each other are
// coalesced into one syscall, and the buffer is flushed when nobody else
// is waiting to send.
type Writer struct {
	conn    net.Conn
	timeout time.Duration
	mu      sync.Mutex
	bw      *bufio.Writer
	waiting atomic.Int32
	hdr     [HeaderSize]byte
	err     error
	later   bool // a flush of frames sent with SendLater is armed
}

// laterDelay bounds how long a frame sent with SendLater waits for one
// sent with Send to carry it.
const laterDelay = time.Millisecond

// NewWriter returns a writer on conn; a frame that cannot be written within
// timeout (0: no limit) fails the writer.
func NewWriter(conn net.Conn, timeout time.Duration) *Writer {
	return &Writer{conn: conn, timeout: timeout, bw: bufio.NewWriterSize(conn, 64<<10)}
}

// Send writes one frame made of h and the payload parts (h.Len is set here).
func (w *Writer) Send(h Header, parts ...[]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n > MaxPayload {
		return fmt.Errorf("wire: payload of %d bytes exceeds the limit", n)
	}
	h.Len = uint32(n)
	w.waiting.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.waiting.Add(-1) < 0 {
		panic("wire: writer count")
	}
	if w.err != nil {
		return w.err
	}
	if w.timeout > 0 {
		w.conn.SetWriteDeadline(time.Now().Add(w.timeout))
	}
	h.Put(w.hdr[:])
	err := w.write(w.hdr[:], parts)
	if err == nil && w.waiting.Load() == 0 {
		err = w.bw.Flush()
	}
	if err != nil {
		w.err = err
	}
	return err
}

// SendLater queues a small frame that nobody waits on (a request with
// FlagNoReply): it goes with the next frame sent, or by itself within
// laterDelay, sparing a system call here and a wake-up at the other end.
func (w *Writer) SendLater(h Header, payload []byte) error {
	h.Len = uint32(len(payload))
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	h.Put(w.hdr[:])
	if err := w.write(w.hdr[:], [][]byte{payload}); err != nil {
		w.err = err
		return err
	}
	if !w.later {
		w.later = true
		time.AfterFunc(laterDelay, w.flushLater)
	}
	return nil
}

// flushLater sends the frames SendLater queued, if nothing carried them.
func (w *Writer) flushLater() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.later = false
	if w.err != nil || w.bw.Buffered() == 0 {
		return
	}
	if w.timeout > 0 {
		w.conn.SetWriteDeadline(time.Now().Add(w.timeout))
	}
	w.err = w.bw.Flush()
}

func (w *Writer) write(hdr []byte, parts [][]byte) error {
	if _, err := w.bw.Write(hdr); err != nil {
		return err
	}
	for _, p := range parts {
		if len(p) < bigPart {
			if _, err := w.bw.Write(p); err != nil {
				return err
			}
			continue
		}
		if err := w.bw.Flush(); err != nil {
			return err
		}
		if _, err := w.conn.Write(p); err != nil {
			return err
		}
	}
	return nil
}
