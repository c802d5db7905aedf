package client

import (
	"io/fs"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// FileInfo describes a file; Sys returns its layer.Attr.
type FileInfo struct {
	name string
	attr layer.Attr
}

var _ fs.FileInfo = (*FileInfo)(nil)

func (fi *FileInfo) Name() string       { return fi.name }
func (fi *FileInfo) Size() int64        { return int64(fi.attr.Size) }
func (fi *FileInfo) Mode() fs.FileMode  { return fileMode(fi.attr.Mode) }
func (fi *FileInfo) ModTime() time.Time { return toTime(fi.attr.Mtime) }
func (fi *FileInfo) IsDir() bool        { return fi.attr.IsDir() }
func (fi *FileInfo) Sys() any           { return fi.attr }

// Info returns fi as a directory entry.
func (fi *FileInfo) Info() (fs.FileInfo, error) { return fi, nil }

// Type returns the type bits of the file's mode.
func (fi *FileInfo) Type() fs.FileMode { return fi.Mode().Type() }

func toTime(t layer.Timespec) time.Time { return time.Unix(t.Sec, int64(t.Nsec)) }

func fromTime(t time.Time) layer.Timespec {
	return layer.Timespec{Sec: t.Unix(), Nsec: uint32(t.Nanosecond())}
}

// fileMode converts stat(2) mode bits to an fs.FileMode.
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & syscall.S_IFMT {
	case syscall.S_IFDIR:
		mode |= fs.ModeDir
	case syscall.S_IFLNK:
		mode |= fs.ModeSymlink
	case syscall.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case syscall.S_IFSOCK:
		mode |= fs.ModeSocket
	case syscall.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFBLK:
		mode |= fs.ModeDevice
	}
	if m&syscall.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&syscall.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&syscall.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// permBits converts an fs.FileMode's permission and special bits to
// stat(2) bits.
func permBits(m fs.FileMode) uint32 {
	bits := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		bits |= syscall.S_ISUID
	}
	if m&fs.ModeSetgid != 0 {
		bits |= syscall.S_ISGID
	}
	if m&fs.ModeSticky != 0 {
		bits |= syscall.S_ISVTX
	}
	return bits
}
