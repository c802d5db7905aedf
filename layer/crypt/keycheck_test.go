package crypt

import (
	"errors"
	"slices"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// The first client records the key's check value on the root; a client
// with another key then fails CheckKey, one with the same key passes, and
// nobody sees or changes the value through the layer.
func TestCheckKeyRecordsAndRefuses(t *testing.T) {
	r := newRig(t, 2)
	r.ok(r.c.CheckKey(r.ctx), "first check")
	if v, err := r.d.Getxattr(r.ctx, "/", XattrKeyCheck); err != nil || len(v) != checkSize {
		t.Fatalf("root's check value below the layer: %x, %v", v, err)
	}
	r.ok(r.layer(r.key).CheckKey(r.ctx), "check with the same key")
	if err := r.layer(NewKey()).CheckKey(r.ctx); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("check with another key: %v, want ErrWrongKey", err)
	}
	if _, err := r.c.Getxattr(r.ctx, "/", XattrKeyCheck); !errors.Is(err, syscall.ENODATA) {
		t.Errorf("getxattr of the check value through the layer: %v, want ENODATA", err)
	}
	names, err := r.c.Listxattr(r.ctx, "/")
	r.ok(err, "listxattr")
	if slices.Contains(names, XattrKeyCheck) {
		t.Errorf("listxattr through the layer shows %s", XattrKeyCheck)
	}
	if err := r.c.Setxattr(r.ctx, "/", XattrKeyCheck, []byte("x"), 0); !errors.Is(err, syscall.EPERM) {
		t.Errorf("setxattr of the check value: %v, want EPERM", err)
	}
	if err := r.c.Removexattr(r.ctx, "/", XattrKeyCheck); !errors.Is(err, syscall.EPERM) {
		t.Errorf("removexattr of the check value: %v, want EPERM", err)
	}
}

// A volume encrypted before there was a check value: the first check
// finds a file's header (here two directories down), so a wrong key is
// refused and not recorded.
func TestCheckKeyOnOlderVolume(t *testing.T) {
	r := newRig(t, 2)
	for _, d := range []string{"/a", "/a/b", "/c"} {
		_, err := r.c.Mkdir(r.ctx, d, layer.MkdirIn{Mode: 0o755})
		r.ok(err, "mkdir "+d)
	}
	r.create(r.c, "/a/b/f", []byte("written before key checks"))
	if err := r.layer(NewKey()).CheckKey(r.ctx); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("wrong key on a volume with a file and no check value: %v, want ErrWrongKey", err)
	}
	if _, err := r.d.Getxattr(r.ctx, "/", XattrKeyCheck); !errors.Is(err, syscall.ENODATA) {
		t.Fatalf("a wrong key's check value was recorded: %v", err)
	}
	r.ok(r.c.CheckKey(r.ctx), "the right key")
}
