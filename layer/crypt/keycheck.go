package crypt

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/layer"
)

// XattrKeyCheck is the xattr of the volume's root that holds the volume
// key's check value (the one in every file's header), so that a client
// given the wrong key fails when it mounts rather than at its first read.
// The layer hides it: it is not listed, read or written through it.
const XattrKeyCheck = "user.mortar.crypt.key-check"

// ErrWrongKey is what CheckKey returns for a key that is not the volume's.
var ErrWrongKey = errors.New("wrong volume key: not the key this volume's files are encrypted with")

// keyCheckDirs and keyCheckNames bound the search of a first check for a
// file header written under another key: directories listed, and names
// read from each.
const (
	keyCheckDirs  = 64
	keyCheckNames = 1024
)

// errNoCheck: the first check found neither a header nor an empty volume
// within its bounds, so it records nothing.
var errNoCheck = errors.New("no file header found within the first directories: the key check value is not recorded")

// CheckKey compares the layer's volume key with the check value on the
// volume's root, and records it there if the root has none yet: on the
// first mount of a volume, or, on a volume encrypted before there was
// such a value, once a file header found by a bounded search from the
// root was written with this key (a search that finds no header in a
// volume it could not see whole records nothing). It fails with
// ErrWrongKey for another key, or with the error that kept it from
// checking.
func (l *Layer) CheckKey(ctx context.Context) error {
	for range 2 {
		v, err := l.Child.Getxattr(ctx, "/", XattrKeyCheck)
		if err == nil {
			return l.compareCheck(v)
		}
		if !errors.Is(err, syscall.ENODATA) {
			return fmt.Errorf("reading the volume key check: %w", err)
		}
		if err := l.probeHeaders(ctx); err != nil {
			return err
		}
		err = l.Child.Setxattr(ctx, "/", XattrKeyCheck, l.keys.check[:], unix.XATTR_CREATE)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("recording the volume key check: %w", err)
		}
		// Another client recorded one meanwhile: compare with it.
	}
	return fmt.Errorf("recording the volume key check: %w", syscall.EAGAIN)
}

func (l *Layer) compareCheck(v []byte) error {
	if subtle.ConstantTimeCompare(v, l.keys.check[:]) != 1 {
		return ErrWrongKey
	}
	return nil
}

// probeHeaders searches the volume breadth first from the root for a
// file header: it fails with ErrWrongKey if the first one found was
// written under another key, and with errNoCheck if it found none but
// could not list the whole volume within its bounds.
func (l *Layer) probeHeaders(ctx context.Context) error {
	dirs := []string{"/"}
	for listed := 0; len(dirs) > 0; listed++ {
		if listed == keyCheckDirs {
			return errNoCheck
		}
		dir := dirs[0]
		dirs = dirs[1:]
		page, err := l.Child.Readdir(ctx, dir, 0, keyCheckNames)
		if err == nil && (page.Missing != nil || !page.EOF) {
			err = errNoCheck // a part of the directory is unseen
		}
		if err != nil {
			return fmt.Errorf("looking for a file header under %s: %w", dir, err)
		}
		for _, e := range page.Entries {
			p := layer.Join(dir, e.Name)
			switch {
			case e.Attr.IsDir():
				dirs = append(dirs, p)
			case e.Attr.IsReg() && e.Attr.Size >= HeaderSize && e.Attr.Linkto == "":
				h, err := l.readHead(ctx, p)
				if err != nil {
					return fmt.Errorf("reading the header of %s: %w", p, err)
				}
				if [4]byte(h[:4]) == magic {
					return l.compareCheck(h[8 : 8+checkSize])
				}
			}
		}
	}
	return nil // the volume has no encrypted content yet
}

// readHead reads the first bytes of a file's header, up to its key check.
func (l *Layer) readHead(ctx context.Context, path string) ([]byte, error) {
	f, err := l.Child.Open(ctx, path, syscall.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Release(context.WithoutCancel(ctx))
	h := make([]byte, 8+checkSize)
	n, err := f.Read(ctx, h, 0)
	if err != nil {
		return nil, err
	}
	if n < len(h) {
		return nil, syscall.EIO
	}
	return h, nil
}

// Getxattr hides the key check value.
func (l *Layer) Getxattr(ctx context.Context, path, name string) ([]byte, error) {
	if name == XattrKeyCheck {
		return nil, syscall.ENODATA
	}
	return l.Child.Getxattr(ctx, path, name)
}

// Listxattr hides the key check value.
func (l *Layer) Listxattr(ctx context.Context, path string) ([]string, error) {
	names, err := l.Child.Listxattr(ctx, path)
	return slices.DeleteFunc(names, func(n string) bool { return n == XattrKeyCheck }), err
}

// Setxattr refuses the key check value's name.
func (l *Layer) Setxattr(ctx context.Context, path, name string, value []byte, flags uint32) error {
	if name == XattrKeyCheck {
		return syscall.EPERM
	}
	return l.Child.Setxattr(ctx, path, name, value, flags)
}

// Removexattr refuses the key check value's name.
func (l *Layer) Removexattr(ctx context.Context, path, name string) error {
	if name == XattrKeyCheck {
		return syscall.EPERM
	}
	return l.Child.Removexattr(ctx, path, name)
}
