package brick

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
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
	log     *slog.Logger
	ctx     context.Context
	cancel  context.CancelFunc
	sem     chan struct{}
	wg      sync.WaitGroup

	mu       sync.Mutex
	files    map[uint64]layer.File
	nextFh   uint64
	owners   map[uint64]uint64
	inflight map[uint64]context.CancelFunc
}

func newConn(nc net.Conn, w *wire.Writer, brickID string, l layer.Layer) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	return &conn{
		nc: nc, w: w, l: l, brickID: brickID, ctx: ctx, cancel: cancel,
		sem:      make(chan struct{}, MaxInFlight),
		files:    map[uint64]layer.File{},
		owners:   map[uint64]uint64{},
		inflight: map[uint64]context.CancelFunc{},
	}
}

// serve reads frames until the connection fails or a frame is malformed.
func (c *conn) serve() error {
	var hb [wire.HeaderSize]byte
	for {
		h, err := wire.ReadHeader(c.nc, &hb)
		if err != nil {
			return err
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

// request reads one request's payload and runs it in its own goroutine.
func (c *conn) request(h wire.Header) error {
	payload, buf, err := c.readPayload(h)
	if err != nil {
		return err
	}
	req, err := wire.DecodeRequest(h.Op, payload)
	if err != nil || req.Op == wire.OpHandshake {
		wire.PutBuf(buf)
		if err == nil {
			err = fmt.Errorf("second handshake")
		}
		return err
	}
	if req.Op == wire.OpWrite {
		req.Data = buf
	}
	ctx, cancel := context.WithCancel(c.ctx)
	c.mu.Lock()
	if _, dup := c.inflight[h.ID]; dup {
		c.mu.Unlock()
		cancel()
		wire.PutBuf(buf)
		return fmt.Errorf("request id %d reused while in flight", h.ID)
	}
	c.inflight[h.ID] = cancel
	c.mu.Unlock()
	c.sem <- struct{}{}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.run(ctx, h, req)
		<-c.sem
		cancel()
		c.mu.Lock()
		delete(c.inflight, h.ID)
		c.mu.Unlock()
		wire.PutBuf(buf)
	}()
	return nil
}

// readPayload reads a request's payload. A write's data lands in its own
// aligned buffer (returned as buf) so the brick can do direct I/O from it.
func (c *conn) readPayload(h wire.Header) (payload, buf []byte, err error) {
	const writeHead = wire.WriteHead
	if h.Op == wire.OpWrite && h.Len >= writeHead {
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

// run executes a request and sends its response.
func (c *conn) run(ctx context.Context, h wire.Header, req *wire.Request) {
	resp := wire.Header{Kind: wire.KindResponse, Op: h.Op, ID: h.ID}
	if req.Op == wire.OpRead {
		c.runRead(ctx, resp, req)
		return
	}
	var e wire.Enc
	err := c.dispatch(ctx, req, &e)
	if err != nil {
		resp.Errno = uint32(layer.ToErrno(err))
		e.B = nil
	}
	if err := c.w.Send(resp, e.B); err != nil {
		c.nc.Close()
	}
}

func (c *conn) runRead(ctx context.Context, resp wire.Header, req *wire.Request) {
	f, err := c.file(req.Fh)
	if err == nil && (req.Len < 0 || req.Len > wire.MaxIO || req.Off < 0) {
		err = syscall.EINVAL
	}
	var buf []byte
	n := 0
	if err == nil {
		buf = wire.GetBuf(int(req.Len))
		defer wire.PutBuf(buf)
		n, err = f.Read(ctx, buf, req.Off)
	}
	if err != nil {
		resp.Errno = uint32(layer.ToErrno(err))
		n = 0
	}
	if err := c.w.Send(resp, buf[:n]); err != nil {
		c.nc.Close()
	}
}

func (c *conn) file(fh uint64) (layer.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.files[fh]; ok {
		return f, nil
	}
	return nil, syscall.EBADF
}

func (c *conn) addFile(f layer.File) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextFh++
	c.files[c.nextFh] = f
	return c.nextFh
}

func (c *conn) takeFile(fh uint64) (layer.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.files[fh]
	if !ok {
		return nil, syscall.EBADF
	}
	delete(c.files, fh)
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
	c.wg.Wait()
	c.mu.Lock()
	files := c.files
	c.files = map[uint64]layer.File{}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, f := range files {
		f.Release(ctx)
	}
	if len(files) > 0 {
		c.log.Debug("released files of closed connection", "count", len(files))
	}
}
