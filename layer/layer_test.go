package layer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
)

func TestCheckPath(t *testing.T) {
	good := []string{"/", "/a", "/a/b.c", "/.hidden", "/a/..b", "/" + strings.Repeat("x", NameMax)}
	for _, p := range good {
		if err := CheckPath(p); err != nil {
			t.Errorf("CheckPath(%q) = %v", p, err)
		}
	}
	bad := map[string]syscall.Errno{
		"":                                   syscall.EINVAL,
		"a":                                  syscall.EINVAL,
		"/a/":                                syscall.EINVAL,
		"//a":                                syscall.EINVAL,
		"/a/../b":                            syscall.EINVAL,
		"/..":                                syscall.EINVAL,
		"/.":                                 syscall.EINVAL,
		"/a\x00b":                            syscall.EINVAL,
		"/" + strings.Repeat("x", NameMax+1): syscall.ENAMETOOLONG,
		"/" + strings.Repeat("a/", PathMax):  syscall.ENAMETOOLONG,
	}
	for p, want := range bad {
		if err := CheckPath(p); !errors.Is(err, want) {
			t.Errorf("CheckPath(%.20q) = %v, want %v", p, err, want)
		}
	}
}

func TestSplitJoin(t *testing.T) {
	for _, c := range []struct{ p, dir, name string }{
		{"/a", "/", "a"}, {"/a/b", "/a", "b"}, {"/a/b/c", "/a/b", "c"}, {"/", "/", ""},
	} {
		dir, name := Split(c.p)
		if dir != c.dir || name != c.name {
			t.Errorf("Split(%q) = %q, %q", c.p, dir, name)
		}
		if c.name != "" && Join(dir, name) != c.p {
			t.Errorf("Join(%q, %q) = %q", dir, name, Join(dir, name))
		}
	}
}

func TestGfidIno(t *testing.T) {
	if RootGfid.Ino() != 1 {
		t.Fatalf("root ino %d", RootGfid.Ino())
	}
	seen := map[uint64]bool{}
	for range 10000 {
		ino := NewGfid().Ino()
		if ino <= 1 || seen[ino] {
			t.Fatalf("ino %d reserved or repeated", ino)
		}
		seen[ino] = true
	}
	if (Gfid{}).IsZero() != true || RootGfid.IsZero() {
		t.Fatal("IsZero")
	}
	if s := RootGfid.String(); s != "00000000-0000-0000-0000-000000000001" {
		t.Fatalf("String = %s", s)
	}
}

func TestToErrno(t *testing.T) {
	for err, want := range map[error]syscall.Errno{
		syscall.ENOENT:                           syscall.ENOENT,
		fmt.Errorf("wrapped: %w", syscall.EXDEV): syscall.EXDEV,
		context.Canceled:                         syscall.EINTR,
		context.DeadlineExceeded:                 syscall.ETIMEDOUT,
		errors.New("anything"):                   syscall.EIO,
	} {
		if got := ToErrno(err); got != want {
			t.Errorf("ToErrno(%v) = %v, want %v", err, got, want)
		}
	}
	if ToErrno(nil) != 0 {
		t.Error("ToErrno(nil) != 0")
	}
}
