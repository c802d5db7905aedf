package e2e

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Every path the kernel accepts — 4095 bytes, mount point included, with
// 255-byte names — works in every operation on a replica 3, a distribute
// x3 and a disperse 2+1 volume. A tree deeper than that, walked one directory at
// a time, ends with a clean ENAMETOOLONG where its volume path would pass
// 4096 bytes (heal records volume paths: docs/REPLICATION.md, limits).
func TestPathsUpToPathMax(t *testing.T) {
	n := startNode(t)
	for _, c := range []struct {
		name, vol string
		keywords  []string
	}{
		{"replica-3", "lp3", []string{"replica", "3"}},
		{"distribute-3", "lpd", nil},
		{"disperse-3", "lpe", []string{"disperse", "3", "redundancy", "1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n.createVolume(c.vol, 3, c.keywords, nil)
			longPaths(t, n.mount(c.vol))
		})
	}
}

// longDir returns a directory path under mnt made of 255-byte names, which
// leaves room for exactly one more name of room bytes within 4095 bytes.
func longDir(mnt string, room int) string {
	p := mnt
	for len(p)+1+255+1+room <= 4095 {
		p += "/" + strings.Repeat("d", 255)
	}
	if fill := 4095 - len(p) - 1 - room - 1; fill > 0 {
		p += "/" + strings.Repeat("e", fill)
	}
	return p
}

func longPaths(t *testing.T, mnt string) {
	ok := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	dir := longDir(mnt, 255)
	file, link := dir+"/"+strings.Repeat("f", 255), dir+"/"+strings.Repeat("g", 255)
	if len(file) != 4095 || len(link) != 4095 {
		t.Fatalf("paths of %d and %d bytes, want 4095", len(file), len(link))
	}
	ok("mkdir -p", os.MkdirAll(dir, 0o755))
	data := []byte("at 4095 bytes\n")
	ok("create and write", os.WriteFile(file, data, 0o644))
	got, err := os.ReadFile(file)
	ok("read", err)
	if !bytes.Equal(got, data) {
		t.Fatalf("read %q", got)
	}
	ok("chmod", os.Chmod(file, 0o600))
	ok("chown", os.Chown(file, 7, 8))
	ok("utimes", unix.UtimesNano(file, []unix.Timespec{{Sec: 1}, {Sec: 2}}))
	ok("setxattr", unix.Setxattr(file, "user.long", []byte("v"), 0))
	var st unix.Stat_t
	ok("stat", unix.Lstat(file, &st))
	if st.Size != int64(len(data)) || st.Mode&0o777 != 0o600 || st.Uid != 7 || st.Mtim.Sec != 2 {
		t.Fatalf("stat: %+v", st)
	}
	ok("link", os.Link(file, link))
	ok("unlink", os.Remove(link))
	ok("rename", os.Rename(file, link))
	ok("symlink", os.Symlink("target", file))
	target, err := os.Readlink(file)
	ok("readlink", err)
	if target != "target" {
		t.Fatalf("readlink %q", target)
	}
	names, err := os.ReadDir(dir)
	ok("readdir", err)
	if len(names) != 2 {
		t.Fatalf("listing: %v", names)
	}
	ok("truncate", os.Truncate(link, 3))
	ok("remove", os.Remove(file))
	ok("remove", os.Remove(link))
	// Deeper, one directory at a time: a clean refusal once the volume
	// path would pass 4096 bytes (it is the mount point shorter).
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	ok("open", err)
	for depth := 1; ; depth++ {
		err = unix.Mkdirat(fd, strings.Repeat("h", 255), 0o755)
		if err != nil || depth > 2 {
			break
		}
		next, err := unix.Openat(fd, strings.Repeat("h", 255), unix.O_RDONLY|unix.O_DIRECTORY, 0)
		ok("open deeper", err)
		unix.Close(fd)
		fd = next
	}
	unix.Close(fd)
	if !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Fatalf("mkdir of a volume path beyond 4096 bytes: %v, want ENAMETOOLONG", err)
	}
	ok("rm -r", os.RemoveAll(filepath.Join(mnt, strings.Repeat("d", 255))))
}

// Times and link counts on distribute are what a local file system gives,
// whichever brick holds what: a directory's mtime and ctime move with
// every name made or removed in it, and unlinking one name of a hard-linked
// file moves the ctime and link count seen through the other.
func TestDistributeTimesAndLinks(t *testing.T) {
	n := startNode(t)
	// Client caches off: what the bricks and distribute answer, not what
	// this mount's directory attribute cache makes of its own changes.
	n.createVolume("tl", 3, nil, []string{"performance.client-cache", "off"})
	mnt := n.mount("tl", "attr-timeout=0,entry-timeout=0")
	dir := filepath.Join(mnt, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stat := func(p string) unix.Stat_t {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	old := unix.Timespec{Sec: 1000}
	for i := range 12 { // names land on every brick
		// The directory's times set in the past (its ctime cannot be: the
		// change's must be later than before it anyway).
		if err := unix.UtimesNano(dir, []unix.Timespec{old, old}); err != nil {
			t.Fatal(err)
		}
		before := stat(dir)
		name := filepath.Join(dir, "n"+strings.Repeat("x", i))
		if i%2 == 0 {
			if err := unix.Mknod(name, unix.S_IFREG|0o644, 0); err != nil {
				t.Fatal(err)
			}
		} else if err := os.Remove(filepath.Join(dir, "n"+strings.Repeat("x", i-1))); err != nil {
			t.Fatal(err)
		}
		after := stat(dir)
		if after.Mtim.Sec == old.Sec || after.Ctim.Sec < before.Ctim.Sec {
			t.Fatalf("step %d: directory mtime %v, ctime %v then %v: not moved by the name's change", i, after.Mtim, before.Ctim, after.Ctim)
		}
	}
	for i := range 6 {
		a, b := filepath.Join(mnt, "a"+strings.Repeat("y", i)), filepath.Join(mnt, "b"+strings.Repeat("z", i))
		if err := os.WriteFile(a, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(a, b); err != nil {
			t.Fatal(err)
		}
		before := stat(b)
		// Timestamps move by clock ticks (a few ms): let one pass, or the
		// unlink's ctime may equal the link's.
		time.Sleep(20 * time.Millisecond)
		if err := os.Remove(a); err != nil {
			t.Fatal(err)
		}
		after := stat(b)
		later := after.Ctim.Sec > before.Ctim.Sec || after.Ctim.Sec == before.Ctim.Sec && after.Ctim.Nsec > before.Ctim.Nsec
		if after.Nlink != 1 || !later {
			t.Fatalf("link %d: after unlinking the other name: nlink %d, ctime %v then %v", i, after.Nlink, before.Ctim, after.Ctim)
		}
	}
}
