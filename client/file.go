package client

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"sync"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// File is an open file on a volume. It implements io.Reader, io.Writer,
// io.Seeker, io.ReaderAt, io.WriterAt and io.Closer. The context given to
// OpenFile is used for the calls without one (Read, Write, ...).
type File struct {
	ctx  context.Context
	name string
	f    layer.File

	mu     sync.Mutex
	off    int64
	closed bool
}

// OpenFile opens a file with os.OpenFile's flags (os.O_CREATE, O_EXCL,
// O_TRUNC, O_APPEND, O_RDWR ...) and permission for new files.
func (v *Volume) OpenFile(ctx context.Context, name string, flag int, perm fs.FileMode) (*File, error) {
	p, err := resolve("open", name)
	if err != nil {
		return nil, err
	}
	var f layer.File
	if flag&os.O_CREATE != 0 {
		f, _, err = v.top.Create(ctx, p, layer.CreateIn{Owner: v.owner(), Flags: uint32(flag), Mode: permBits(perm)})
		if errors.Is(err, syscall.EEXIST) && flag&os.O_EXCL == 0 {
			f, err = v.top.Open(ctx, p, uint32(flag&^os.O_CREATE))
		}
	} else {
		f, err = v.top.Open(ctx, p, uint32(flag))
	}
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	return &File{ctx: ctx, name: name, f: f}, nil
}

// Create creates or truncates a file for reading and writing (mode 0666
// before the caller's umask is not applied: the library has none).
func (v *Volume) Create(ctx context.Context, name string) (*File, error) {
	return v.OpenFile(ctx, name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

// OpenRead opens a file for reading.
func (v *Volume) OpenRead(ctx context.Context, name string) (*File, error) {
	return v.OpenFile(ctx, name, os.O_RDONLY, 0)
}

// ReadFile reads a whole file.
func (v *Volume) ReadFile(ctx context.Context, name string) ([]byte, error) {
	f, err := v.OpenRead(ctx, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// WriteFile writes data to a file, creating it with perm or truncating it.
func (v *Volume) WriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error {
	f, err := v.OpenFile(ctx, name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Name returns the name the file was opened with.
func (f *File) Name() string { return f.name }

func (f *File) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.f.Read(f.ctx, p, off)
	if err != nil {
		return n, pathErr("read", f.name, err)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *File) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.f.Write(f.ctx, p, off)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	return n, pathErr("write", f.name, err)
}

func (f *File) Read(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.ReadAt(p, f.off)
	f.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (f *File) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.WriteAt(p, f.off)
	f.off += int64(n)
	return n, err
}

// Seek sets the offset for the next Read or Write (io.SeekEnd asks the
// volume for the current size).
func (f *File) Seek(offset int64, whence int) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch whence {
	case io.SeekCurrent:
		offset += f.off
	case io.SeekEnd:
		a, err := f.f.Getattr(f.ctx)
		if err != nil {
			return f.off, pathErr("seek", f.name, err)
		}
		offset += int64(a.Size)
	}
	if offset < 0 {
		return f.off, &fs.PathError{Op: "seek", Path: f.name, Err: syscall.EINVAL}
	}
	f.off = offset
	return offset, nil
}

// Stat returns the open file's attributes.
func (f *File) Stat() (*FileInfo, error) {
	a, err := f.f.Getattr(f.ctx)
	if err != nil {
		return nil, pathErr("stat", f.name, err)
	}
	_, base := layer.Split("/" + f.name)
	return &FileInfo{name: base, attr: a}, nil
}

// Sync flushes the file's data and metadata to the bricks' disks.
func (f *File) Sync() error { return pathErr("sync", f.name, f.f.Fsync(f.ctx, false)) }

// Truncate changes the file's size.
func (f *File) Truncate(size int64) error {
	if size < 0 {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: syscall.EINVAL}
	}
	_, err := f.f.Setattr(f.ctx, layer.SetattrIn{Valid: layer.SetSize, Size: uint64(size)})
	return pathErr("truncate", f.name, err)
}

// Close releases the file. A second Close returns fs.ErrClosed.
func (f *File) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return &fs.PathError{Op: "close", Path: f.name, Err: fs.ErrClosed}
	}
	f.closed = true
	f.mu.Unlock()
	return pathErr("close", f.name, f.f.Release(f.ctx))
}
