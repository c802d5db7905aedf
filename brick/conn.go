package brick

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/wire"
)

// lockOwners makes lock owners unique across connections: two clients may
// use the same owner numbers.
var lockOwners atomic.Uint64

// conn is one client connection to one brick.
type conn struct {
	nc      net.Conn
	w       *wire.Writer
	l       layer.Layer
	brickID string
	entries *entryLocks // of the brick: directories healers hold still
	// dirLeases are the brick's directories leased to clients
	// (dirlease.go).
	dirLeases *dirLeases
	// watchers are the brick's connections told of changes (notify.go).
	watchers *watchers
	// admitted is who the connection serves, for Server.Recheck.
	admitted *admission
	// layoutGen is the layout generation the client gave, fence its
	// brick's (fence.go).
	layoutGen uint64
	fence     *fence
	log       *slog.Logger
	ctx       context.Context
	cancel    context.CancelFunc
	limits    Limits
	wg        sync.WaitGroup

	// The admission of requests under limits (see admit).
	gateMu    sync.Mutex
	gateCond  *sync.Cond
	running   int   // requests admitted and not done
	bytes     int64 // their payload bytes
	lockWaits int   // blocking Setlk requests under way (not in running)

	// markAbandoned: files written through this connection and still
	// open when it ends are marked for the healer (abandoned.go).
	markAbandoned bool
	// touched: what this connection changed last (names and metadata),
	// marked for the healer if it ends without a goodbye (abandoned.go).
	touched changedInodes

	mu       sync.Mutex
	files    map[uint64]layer.File
	paths    map[uint64]string // of the files, as opened (for notices)
	written  map[uint64]bool   // the files whose data a request changed
	nextFh   uint64
	owners   map[uint64]uint64
	inflight map[uint64]context.CancelFunc
}

func newConn(nc net.Conn, w *wire.Writer, brickID string, l layer.Layer) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{
		nc: nc, w: w, l: l, brickID: brickID, ctx: ctx, cancel: cancel, fence: &fence{},
		limits:   DefaultLimits(),
		log:      slog.New(slog.DiscardHandler),
		files:    map[uint64]layer.File{},
		paths:    map[uint64]string{},
		written:  map[uint64]bool{},
		owners:   map[uint64]uint64{},
		inflight: map[uint64]context.CancelFunc{},
	}
	c.gateCond = sync.NewCond(&c.gateMu)
	return c
}

// serve reads frames until the connection fails or a frame is malformed
// or too large. A panic while reading is logged with its stack and ends
// the connection (where the stream stands is then unknown), not the
// server.
func (c *conn) serve() (err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("panic reading brick connection", "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("panic reading the connection: %v", p)
		}
	}()
	var hb [wire.HeaderSize]byte
	for {
		// Only the wait for a frame is bounded: a payload may wait for
		// admission (back-pressure) as long as it must.
		c.nc.SetReadDeadline(time.Now().Add(c.limits.IdleTimeout))
		h, err := wire.ReadHeader(c.nc, &hb)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return fmt.Errorf("client sent nothing for %v: taken for dead", c.limits.IdleTimeout)
			}
			return err
		}
		c.nc.SetReadDeadline(time.Time{})
		if int64(h.Len) > int64(c.limits.MaxFrame) {
			return fmt.Errorf("%w: %s frame of %d bytes exceeds the connection's %d-byte limit",
				wire.ErrFrameTooLarge, wire.OpName(h.Op), h.Len, c.limits.MaxFrame)
		}
		switch h.Kind {
		case wire.KindPing:
			if h.Len != 0 {
				return fmt.Errorf("ping with payload")
			}
			if err := c.w.Send(wire.Header{Kind: wire.KindPong, ID: h.ID}); err != nil {
				return err
			}
		case wire.KindCancel:
			if h.Len != 0 {
				return fmt.Errorf("cancel with payload")
			}
			c.mu.Lock()
			if cancel := c.inflight[h.ID]; cancel != nil {
				cancel()
			}
			c.mu.Unlock()
		case wire.KindRequest:
			if err := c.request(h); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unexpected frame kind %d from client", h.Kind)
		}
	}
}

// request reads one request's payload and runs it in its own goroutine,
// once admitted under the connection's limits: until then the connection
// is not read further.
func (c *conn) request(h wire.Header) error {
	size := int64(h.Len)
	setlk := h.Op == wire.OpSetlk // admitted once decoded: it may be a lock wait
	done := func() {}             // gives back what admission took
	// A lease's return is never held back: the connection's requests may
	// all be waiting for it (other files' lock requests recalling it, or
	// other clients' operations in a leased directory).
	if !setlk && h.Op != wire.OpLeaseReturn && h.Op != wire.OpDirLeaseReturn {
		c.admit(size)
		done = func() { c.leave(size) }
	}
	payload, buf, err := c.readPayload(h)
	if err != nil {
		done()
		return err
	}
	req, err := wire.DecodeRequest(h.Op, payload)
	if err != nil || req.Op == wire.OpHandshake {
		wire.PutBuf(buf)
		done()
		if err == nil {
			err = fmt.Errorf("second handshake")
		}
		return err
	}
	if buf != nil {
		req.Data = buf
	}
	req.KeepUndo = h.Flags&wire.FlagKeepUndo != 0
	if setlk {
		var ok bool
		if done, ok = c.admitSetlk(req, size); !ok {
			c.log.Warn("too many lock waits on one connection: refusing one", "limit", c.limits.MaxLockWaits)
			return c.w.Send(wire.Header{Kind: wire.KindResponse, Op: h.Op, ID: h.ID, Errno: uint32(syscall.ENOLCK)})
		}
	}
	ctx, cancel := context.WithCancel(c.ctx)
	c.mu.Lock()
	if _, dup := c.inflight[h.ID]; dup {
		c.mu.Unlock()
		cancel()
		wire.PutBuf(buf)
		done()
		return fmt.Errorf("request id %d reused while in flight", h.ID)
	}
	c.inflight[h.ID] = cancel
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		retired := false
		// retire runs before the answer goes out: once answered, the
		// client may reuse the id, and may send what the request's place
		// (admission, a lock wait) was holding back.
		retire := func() {
			if !retired {
				retired = true
				cancel()
				c.mu.Lock()
				delete(c.inflight, h.ID)
				c.mu.Unlock()
				done()
			}
		}
		panicked := c.run(ctx, h, req, retire)
		retire()
		if !panicked {
			wire.PutBuf(buf) // after a panic the layer may still hold it
		}
	}()
	return nil
}

// admit waits until a request of size payload bytes fits the connection's
// limits, and counts it in; leave counts it out. Only the connection's
// reader waits here.
func (c *conn) admit(size int64) {
	c.gateMu.Lock()
	for c.running >= c.limits.MaxInFlight || c.running > 0 && c.bytes+size > c.limits.MaxInFlightBytes {
		c.gateCond.Wait()
	}
	c.running++
	c.bytes += size
	c.gateMu.Unlock()
}

func (c *conn) leave(size int64) {
	c.gateMu.Lock()
	c.running--
	c.bytes -= size
	c.gateMu.Unlock()
	c.gateCond.Signal()
}

// parked runs wait, for which a running request gives its place up: the
// connection's other requests may be what it waits for (another client's
// directory lease recalled while this client's requests fill the places
// its held creates need). The request takes its place back after, past
// the limit if it must.
func (c *conn) parked(wait func() error) error {
	c.gateMu.Lock()
	c.running--
	c.gateMu.Unlock()
	c.gateCond.Signal()
	err := wait()
	c.gateMu.Lock()
	c.running++
	c.gateMu.Unlock()
	return err
}

// admitSetlk admits a decoded Setlk: one that waits for its lock among the
// connection's lock waits, which do not hold request slots (false when they
// are at their limit), another like any request.
func (c *conn) admitSetlk(req *wire.Request, size int64) (done func(), ok bool) {
	if !req.Wait {
		c.admit(size)
		return func() { c.leave(size) }, true
	}
	c.gateMu.Lock()
	defer c.gateMu.Unlock()
	if c.lockWaits >= c.limits.MaxLockWaits {
		return nil, false
	}
	c.lockWaits++
	return func() {
		c.gateMu.Lock()
		c.lockWaits--
		c.gateMu.Unlock()
	}, true
}

// readPayload reads a request's payload. A write's data lands in its own
// aligned buffer (returned as buf) so the brick can do direct I/O from it.
func (c *conn) readPayload(h wire.Header) (payload, buf []byte, err error) {
	if writeHead, ok := wire.DataFollows(h.Op); ok && h.Len >= uint32(writeHead) {
		payload = make([]byte, writeHead)
		if _, err = io.ReadFull(c.nc, payload); err != nil {
			return nil, nil, err
		}
		buf = wire.GetBuf(int(h.Len) - writeHead)
		if _, err = io.ReadFull(c.nc, buf); err != nil {
			wire.PutBuf(buf)
			return nil, nil, err
		}
		return payload, buf, nil
	}
	payload = make([]byte, h.Len)
	_, err = io.ReadFull(c.nc, payload)
	return payload, nil, err
}

// run executes a request and sends its response. A panic in the layer
// answers EIO (see guard); it reports whether there was one. A panic while
// answering closes the connection: the stream's state is unknown.
func (c *conn) run(ctx context.Context, h wire.Header, req *wire.Request, retire func()) (panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("panic answering brick request", "op", wire.OpName(h.Op), "panic", p, "stack", string(debug.Stack()))
			c.nc.Close()
			panicked = true
		}
	}()
	resp := wire.Header{Kind: wire.KindResponse, Op: h.Op, ID: h.ID}
	if req.Op == wire.OpRead || req.Op == wire.OpReadUndo {
		return c.runRead(ctx, resp, req, retire)
	}
	var e wire.Enc
	err := c.guard(req.Op, req.Path, &panicked, func() error { return c.dispatch(ctx, req, &e) })
	if err == nil && c.watchers.active() {
		c.watchers.tell(c, c.changesOf(req))
	}
	if err == nil && len(e.B) > wire.MaxPayload {
		c.log.Warn("answer too large for a frame", "op", wire.OpName(h.Op), "path", req.Path, "bytes", len(e.B))
		err = syscall.EOVERFLOW
	}
	if err != nil {
		resp.Errno = uint32(layer.ToErrno(err))
		e.B = nil
	}
	retire()
	if h.Flags&wire.FlagNoReply != 0 {
		return panicked
	}
	if err := c.w.Send(resp, e.B); err != nil {
		c.nc.Close()
	}
	if req.Op == wire.OpWatch && resp.Errno == 0 && c.watchers != nil {
		c.watchers.answered(c)
	}
	return panicked
}

// guard runs fn, the part of a request the layer does. A panic there is
// logged with its stack and becomes EIO for that request alone (and sets
// *panicked): a bug in a layer costs one answer, not the server.
func (c *conn) guard(op uint8, path string, panicked *bool, fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("panic in brick operation", "op", wire.OpName(op), "path", path, "panic", p, "stack", string(debug.Stack()))
			*panicked = true
			err = fmt.Errorf("panic in %s: %v: %w", wire.OpName(op), p, syscall.EIO)
		}
	}()
	return fn()
}

func (c *conn) runRead(ctx context.Context, resp wire.Header, req *wire.Request, retire func()) (panicked bool) {
	f, err := c.file(req.Fh)
	if err == nil && (req.Len < 0 || req.Len > wire.MaxIO || req.Off < 0) {
		err = syscall.EINVAL
	}
	var buf []byte
	n := 0
	if err == nil {
		buf = wire.GetBuf(int(req.Len))
		err = c.guard(req.Op, "", &panicked, func() (err error) {
			if req.Op == wire.OpReadUndo {
				n, err = layer.ReadUndo(ctx, f, buf, req.Off)
			} else {
				n, err = f.Read(ctx, buf, req.Off)
			}
			if err == nil && (n < 0 || n > len(buf)) {
				err = fmt.Errorf("read returned %d bytes for a %d-byte buffer: %w", n, len(buf), syscall.EIO)
			}
			return err
		})
		if !panicked {
			defer wire.PutBuf(buf)
		}
	}
	if err != nil {
		resp.Errno = uint32(layer.ToErrno(err))
		n = 0
	}
	retire()
	if err := c.w.Send(resp, buf[:n]); err != nil {
		c.nc.Close()
	}
	return panicked
}

// fileOf returns the open file request r names, noting it written if r
// changes its data (abandoned.go), under one lock.
func (c *conn) fileOf(r *wire.Request) (layer.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.files[r.Fh]
	if !ok {
		return nil, syscall.EBADF
	}
	if c.changes(r) {
		c.written[r.Fh] = true
	}
	return f, nil
}

func (c *conn) file(fh uint64) (layer.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.files[fh]; ok {
		return f, nil
	}
	return nil, syscall.EBADF
}

// addFile keeps f, opened at path, and returns its handle; written says
// its opening changed its data (O_TRUNC, or a file made with its data).
func (c *conn) addFile(f layer.File, path string, written bool) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextFh++
	c.files[c.nextFh] = f
	c.paths[c.nextFh] = path
	if written && c.markAbandoned {
		c.written[c.nextFh] = true
	}
	return c.nextFh
}

// pathOf returns the path file fh was opened at ("" if none).
func (c *conn) pathOf(fh uint64) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paths[fh]
}

func (c *conn) takeFile(fh uint64) (layer.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.files[fh]
	if !ok {
		return nil, syscall.EBADF
	}
	delete(c.files, fh)
	delete(c.paths, fh)
	delete(c.written, fh)
	return f, nil
}

// owner maps a client's lock owner to one unique on this server.
func (c *conn) owner(o uint64) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	u, ok := c.owners[o]
	if !ok {
		u = lockOwners.Add(1)
		c.owners[o] = u
	}
	return u
}

// shutdown waits for running requests and releases every open file, which
// drops the locks this client held.
func (c *conn) shutdown() {
	c.cancel()
	c.nc.Close()
	c.dirLeases.release(c) // whoever waits for them goes on
	if c.watchers != nil {
		c.watchers.watch(c, false)
	}
	c.wg.Wait()
	if c.entries != nil {
		c.entries.release(c)
	}
	c.mu.Lock()
	files, written := c.files, c.written
	c.files, c.paths, c.written = map[uint64]layer.File{}, map[uint64]string{}, map[uint64]bool{}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for fh, f := range files {
		var panicked bool
		if written[fh] {
			c.guard(wire.OpWrite, "", &panicked, func() error { return c.markDirty(f) })
		}
		c.guard(wire.OpRelease, "", &panicked, func() error { return f.Release(ctx) })
	}
	if len(files) > 0 {
		c.log.Debug("released files of closed connection", "count", len(files))
	}
	c.markTouched()
}
