package crypt

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// Options tune the layer.
type Options struct {
	Logger *slog.Logger
}

// Layer encrypts the contents of the regular files of its child.
type Layer struct {
	layer.Base
	keys *volumeKeys
	log  *slog.Logger

	mu     sync.Mutex
	inodes map[layer.Gfid]*inode // the inodes with files open through the layer
}

var _ layer.Layer = (*Layer)(nil)

// New wraps child, whose files it encrypts with keys wrapped by key (the
// volume key, KeySize bytes).
func New(child layer.Layer, key []byte, opts Options) (*Layer, error) {
	keys, err := deriveKeys(key)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Layer{Base: layer.Base{Child: child}, keys: keys, log: log, inodes: map[layer.Gfid]*inode{}}, nil
}

// inode is what the layer knows of a file while it is open here.
type inode struct {
	gfid layer.Gfid
	refs int // guarded by Layer.mu

	// mu is held by writes and truncations, and shared by reads: a read
	// never sees a block half rewritten by this client.
	mu sync.RWMutex
	ks atomic.Pointer[keyState]
	// pending: ks holds a key made here that is not on the bricks yet
	// (the header goes with the file's first write). Guarded by mu.
	pending bool
	// size is the plaintext size as of the last open, write or
	// truncation here. Guarded by mu.
	size int64
}

// keyState is the file's key as read from its header: k nil and err nil
// for a file without a header (empty).
type keyState struct {
	k   *fileKey
	err error
}

// childFlags are the flags a file is opened with below: the layer reads
// to rewrite blocks, places every write itself, and stores blocks at
// offsets O_DIRECT would refuse.
func childFlags(flags uint32) uint32 {
	if flags&syscall.O_ACCMODE == syscall.O_WRONLY {
		flags = flags&^syscall.O_ACCMODE | syscall.O_RDWR
	}
	return flags &^ (syscall.O_APPEND | syscall.O_DIRECT)
}

func (l *Layer) Lookup(ctx context.Context, path string) (layer.Attr, error) {
	a, err := l.Child.Lookup(ctx, path)
	return plainAttr(a), err
}

func (l *Layer) Mknod(ctx context.Context, path string, in layer.MknodIn) (layer.Attr, error) {
	a, err := l.Child.Mknod(ctx, path, in)
	return plainAttr(a), err
}

func (l *Layer) Link(ctx context.Context, oldpath, newpath string) (layer.Attr, error) {
	a, err := l.Child.Link(ctx, oldpath, newpath)
	return plainAttr(a), err
}

func (l *Layer) Readdir(ctx context.Context, path string, cookie uint64, max int) (layer.DirPage, error) {
	page, err := l.Child.Readdir(ctx, path, cookie, max)
	for i := range page.Entries {
		page.Entries[i].Attr = plainAttr(page.Entries[i].Attr)
	}
	return page, err
}

// Setattr changes the size of a regular file through an open file, which
// re-encrypts the new last block.
func (l *Layer) Setattr(ctx context.Context, path string, in layer.SetattrIn) (layer.Attr, error) {
	if in.Valid&layer.SetSize == 0 {
		a, err := l.Child.Setattr(ctx, path, in)
		return plainAttr(a), err
	}
	f, err := l.Open(ctx, path, syscall.O_WRONLY)
	if err != nil {
		return layer.Attr{}, err
	}
	a, err := f.Setattr(ctx, in)
	if rerr := f.Release(ctx); err == nil && rerr != nil {
		return layer.Attr{}, rerr
	}
	return a, err
}

func (l *Layer) Create(ctx context.Context, path string, in layer.CreateIn) (layer.File, layer.Attr, error) {
	cin := in
	cin.Flags = childFlags(in.Flags)
	cf, a, err := l.Child.Create(ctx, path, cin)
	if err != nil {
		return nil, a, err
	}
	var hdr []byte
	if a.Size > 0 { // an existing file, opened
		hdr = make([]byte, HeaderSize)
		n, err := cf.Read(ctx, hdr, 0)
		if err != nil {
			cf.Release(ctx)
			return nil, layer.Attr{}, err
		}
		hdr = hdr[:n]
	}
	return l.wrap(cf, a, hdr, in.Flags, path), plainAttr(a), nil
}

func (l *Layer) Open(ctx context.Context, path string, flags uint32) (layer.File, error) {
	cf, err := l.Child.Open(ctx, path, childFlags(flags))
	if err != nil {
		return nil, err
	}
	// The header is read beside the Getattr that tells whose it is.
	hdr := make([]byte, HeaderSize)
	var n int
	var herr error
	done := make(chan struct{})
	go func() {
		n, herr = cf.Read(ctx, hdr, 0)
		close(done)
	}()
	a, err := cf.Getattr(ctx)
	<-done
	if err != nil {
		cf.Release(ctx)
		return nil, err
	}
	if !a.IsReg() {
		return cf, nil
	}
	if herr != nil {
		cf.Release(ctx)
		return nil, herr
	}
	return l.wrap(cf, a, hdr[:n], flags, path), nil
}

// wrap makes cf, just opened with attributes a and header hdr (what the
// bricks hold: empty for an empty file), a File of the layer.
func (l *Layer) wrap(cf layer.File, a layer.Attr, hdr []byte, flags uint32, path string) *file {
	l.mu.Lock()
	in := l.inodes[a.Gfid]
	if in == nil {
		in = &inode{gfid: a.Gfid}
		in.ks.Store(&keyState{})
		l.inodes[a.Gfid] = in
	}
	in.refs++
	l.mu.Unlock()

	f := &file{File: cf, l: l, in: in, path: path, append: flags&syscall.O_APPEND != 0}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.pending && a.Size == 0 {
		return f // a new file of this client, not written yet
	}
	in.pending = false
	in.size = int64(plainSize(a.Size))
	if a.Size == 0 {
		in.ks.Store(&keyState{})
		return f
	}
	if cur := in.ks.Load(); cur.k != nil && string(cur.k.header[:]) == string(hdr) {
		return f
	}
	in.ks.Store(l.openHeader(hdr, in.gfid))
	return f
}

// openHeader unwraps the key in a file's header.
func (l *Layer) openHeader(hdr []byte, gfid layer.Gfid) *keyState {
	if len(hdr) < HeaderSize {
		return &keyState{err: errHeader}
	}
	k, err := l.keys.open(hdr, gfid)
	if err != nil {
		return &keyState{err: err}
	}
	return &keyState{k: k}
}

func (l *Layer) unref(in *inode) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if in.refs--; in.refs == 0 {
		delete(l.inodes, in.gfid)
	}
}

// failed logs an operation on f that a check of the layer failed (block
// b, or -1 for the header), and returns err.
func (f *file) failed(op string, b int64, err error) error {
	var ce *cryptError
	if !errors.As(err, &ce) {
		return err
	}
	args := []any{"path", f.path, "gfid", f.in.gfid}
	if b >= 0 {
		args = append(args, "block", b)
	}
	msg := "crypt: " + op + " fails: " + ce.msg
	switch ce {
	case errWrongKey:
		msg = "crypt: " + op + " fails: the file's key does not open with this volume key (wrong key given to this client?)"
	case errHeader:
		msg = "crypt: " + op + " fails: the file's header (its wrapped key) is corrupt or was tampered with on a brick"
	case errBlock:
		msg = "crypt: " + op + " fails: a block does not authenticate: changed, moved or cut on a brick"
	}
	f.l.log.Error(msg, args...)
	return err
}
