package client

import (
	"context"
	"io"
	"io/fs"
)

// FS returns the volume as an io/fs file system (read-only view), so that
// fs.WalkDir, fs.ReadFile, http.FS and friends work on it.
func (v *Volume) FS(ctx context.Context) fs.FS { return fsys{v: v, ctx: ctx} }

type fsys struct {
	v   *Volume
	ctx context.Context
}

var (
	_ fs.ReadDirFS  = fsys{}
	_ fs.StatFS     = fsys{}
	_ fs.ReadFileFS = fsys{}
)

func (s fsys) check(op, name string) error {
	if !fs.ValidPath(name) {
		return &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	return nil
}

func (s fsys) Open(name string) (fs.File, error) {
	if err := s.check("open", name); err != nil {
		return nil, err
	}
	fi, err := s.v.Stat(s.ctx, name)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		fi.name = dirName(name)
		return &dirFile{s: s, name: name, info: fi}, nil
	}
	f, err := s.v.OpenRead(s.ctx, name)
	if err != nil {
		return nil, err
	}
	return fsFile{f}, nil
}

func (s fsys) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := s.check("readdir", name); err != nil {
		return nil, err
	}
	return s.v.ReadDir(s.ctx, name)
}

func (s fsys) Stat(name string) (fs.FileInfo, error) {
	if err := s.check("stat", name); err != nil {
		return nil, err
	}
	fi, err := s.v.Stat(s.ctx, name)
	if err != nil {
		return nil, err
	}
	fi.name = dirName(name)
	return fi, nil
}

func (s fsys) ReadFile(name string) ([]byte, error) {
	if err := s.check("readfile", name); err != nil {
		return nil, err
	}
	return s.v.ReadFile(s.ctx, name)
}

func dirName(name string) string {
	if name == "." {
		return "."
	}
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' {
			return name[i+1:]
		}
	}
	return name
}

// fsFile adapts *File to fs.File.
type fsFile struct{ *File }

func (f fsFile) Stat() (fs.FileInfo, error) {
	fi, err := f.File.Stat()
	if err != nil {
		return nil, err
	}
	return fi, nil
}

// dirFile is an open directory for fs.ReadDirFile.
type dirFile struct {
	s       fsys
	name    string
	info    *FileInfo
	entries []fs.DirEntry
	read    bool
}

func (d *dirFile) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *dirFile) Close() error               { return nil }

func (d *dirFile) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.name, Err: fs.ErrInvalid}
}

func (d *dirFile) ReadDir(n int) ([]fs.DirEntry, error) {
	if !d.read {
		entries, err := d.s.v.ReadDir(d.s.ctx, d.name)
		if err != nil {
			return nil, err
		}
		d.entries, d.read = entries, true
	}
	if n <= 0 {
		out := d.entries
		d.entries = nil
		return out, nil
	}
	if len(d.entries) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(d.entries))
	out := d.entries[:n]
	d.entries = d.entries[n:]
	return out, nil
}
