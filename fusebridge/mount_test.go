package fusebridge

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/layer/layertest"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/fusebridge/posixtest"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/locks"
)

func TestMain(m *testing.M) {
	posixtest.HelperMain()
	os.Exit(m.Run())
}

// searchableDir is a temporary directory every user can search.
func searchableDir(t *testing.T) string {
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func needFuse(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mount tests need root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
}

// newStore makes a posix brick in a temporary directory.
func newStore(t *testing.T) *posix.Store {
	t.Helper()
	root := filepath.Join(searchableDir(t), "brick")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := posix.Mark(root, "test-volume", true); err != nil {
		t.Fatal(err)
	}
	s, err := posix.New(root, posix.Options{VolumeID: "test-volume"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// mount mounts top in a temporary directory until the end of the test.
func mount(t *testing.T, top layer.Layer, opts Options) string {
	t.Helper()
	_, mnt := mountBridge(t, top, opts)
	return mnt
}

// mountBridge is mount that also returns the bridge, to look inside.
func mountBridge(t *testing.T, top layer.Layer, opts Options) (*bridge, string) {
	t.Helper()
	mnt := filepath.Join(searchableDir(t), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	opts.AllowOther = true
	fs := newBridge(top, opts)
	srv, err := fs.mount(mnt)
	if err != nil {
		t.Fatalf("mount: %v", err)
	}
	t.Cleanup(func() { unmount(t, srv, mnt) })
	return fs, mnt
}

func unmount(t *testing.T, srv *fuse.Server, mnt string) {
	done := make(chan error, 1)
	go func() { done <- srv.Unmount() }()
	select {
	case err := <-done:
		if err == nil {
			return
		}
		t.Logf("unmount %s: %v; detaching", mnt, err)
	case <-time.After(10 * time.Second):
		t.Logf("unmount %s hangs; detaching", mnt)
	}
	if out, err := exec.Command("umount", "-l", mnt).CombinedOutput(); err != nil {
		t.Logf("umount -l %s: %v %s", mnt, err, out)
	}
}

// TestPosix runs the POSIX suite on a mount of a posix brick with locks.
func TestPosix(t *testing.T) {
	needFuse(t)
	mnt := mount(t, locks.New(newStore(t)), Options{})
	posixtest.Run(t, mnt)
}

// TestProcMounts checks how the mount presents itself.
func TestProcMounts(t *testing.T) {
	needFuse(t)
	mnt := mount(t, newStore(t), Options{FsName: "host:/gv0"})
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[1] != mnt {
			continue
		}
		if f[0] != "host:/gv0" || f[2] != "fuse.mortar" || !strings.Contains(f[3], "default_permissions") ||
			!strings.Contains(f[3], "allow_other") {
			t.Fatalf("mount line %q", line)
		}
		var st unix.Stat_t
		if err := unix.Stat(mnt, &st); err != nil || st.Ino != 1 {
			t.Fatalf("root inode %d, %v", st.Ino, err)
		}
		// Children do not inherit the FUSE connection.
		out, err := exec.Command("/bin/sh", "-c", "ls -l /proc/self/fd/").CombinedOutput()
		if err != nil || strings.Contains(string(out), "/dev/fuse") {
			t.Fatalf("a child's descriptors: %s, %v", out, err)
		}
		return
	}
	t.Fatalf("%s not in /proc/self/mounts", mnt)
}

// TestTwoMounts mounts one store twice: each mount sees the other's
// changes once the caches expire, and a lock taken through one blocks the
// same range through the other.
func TestTwoMounts(t *testing.T) {
	needFuse(t)
	top := locks.New(newStore(t))
	opts := Options{AttrTimeout: 100 * time.Millisecond, EntryTimeout: 100 * time.Millisecond,
		NegativeTimeout: 100 * time.Millisecond}
	a, b := mount(t, top, opts), mount(t, top, opts)

	eventually := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(3 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not seen through the other mount", what)
			}
		}
	}
	_, err := os.Stat(filepath.Join(b, "f")) // a negative entry in b
	if !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a, "f"), []byte("from a"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually("create", func() bool {
		got, err := os.ReadFile(filepath.Join(b, "f"))
		return err == nil && string(got) == "from a"
	})
	if err := os.WriteFile(filepath.Join(b, "f"), []byte("from b, longer"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually("write", func() bool {
		got, err := os.ReadFile(filepath.Join(a, "f"))
		return err == nil && string(got) == "from b, longer"
	})
	if err := os.Rename(filepath.Join(a, "f"), filepath.Join(a, "g")); err != nil {
		t.Fatal(err)
	}
	eventually("rename", func() bool {
		_, err1 := os.Stat(filepath.Join(b, "f"))
		_, err2 := os.Stat(filepath.Join(b, "g"))
		return os.IsNotExist(err1) && err2 == nil
	})
	if err := os.Mkdir(filepath.Join(b, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	eventually("mkdir", func() bool {
		st, err := os.Stat(filepath.Join(a, "d"))
		return err == nil && st.IsDir()
	})

	// Locks: this process locks through a, a helper tries through b.
	p := filepath.Join(a, "g")
	fd, err := unix.Open(p, unix.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	lk := unix.Flock_t{Type: unix.F_WRLCK, Start: 0, Len: 10}
	if err := unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &lk); err != nil {
		t.Fatal(err)
	}
	req := posixtest.LockRequest{Op: "setlk", Path: filepath.Join(b, "g"), Type: unix.F_WRLCK, Start: 5, Len: 1}
	if res := posixtest.OtherProcess(t, req); res.Errno != unix.EAGAIN {
		t.Fatalf("lock through the other mount: errno %v, want EAGAIN", res.Errno)
	}
	req.Start = 10
	if res := posixtest.OtherProcess(t, req); res.Errno != 0 {
		t.Fatalf("free range through the other mount: %v", res.Errno)
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	freq := posixtest.LockRequest{Op: "flock", Path: filepath.Join(b, "g"), How: unix.LOCK_SH | unix.LOCK_NB}
	if res := posixtest.OtherProcess(t, freq); res.Errno != unix.EWOULDBLOCK {
		t.Fatalf("flock through the other mount: %v, want EWOULDBLOCK", res.Errno)
	}
}

// ioRecorder records the sizes of the reads and writes that reach it.
type ioRecorder struct {
	layer.Base
	mu            sync.Mutex
	reads, writes []int
}

type recFile struct {
	layer.File
	r *ioRecorder
}

func (r *ioRecorder) Create(ctx context.Context, p string, in layer.CreateIn) (layer.File, layer.Attr, error) {
	f, a, err := r.Child.Create(ctx, p, in)
	if err != nil {
		return nil, a, err
	}
	return recFile{f, r}, a, nil
}

func (r *ioRecorder) Open(ctx context.Context, p string, flags uint32) (layer.File, error) {
	f, err := r.Child.Open(ctx, p, flags)
	if err != nil {
		return nil, err
	}
	return recFile{f, r}, nil
}

func (f recFile) Read(ctx context.Context, p []byte, off int64) (int, error) {
	f.r.mu.Lock()
	f.r.reads = append(f.r.reads, len(p))
	f.r.mu.Unlock()
	return f.File.Read(ctx, p, off)
}

func (f recFile) Write(ctx context.Context, p []byte, off int64) (int, error) {
	f.r.mu.Lock()
	f.r.writes = append(f.r.writes, len(p))
	f.r.mu.Unlock()
	return f.File.Write(ctx, p, off)
}

// TestOneMegabyteIO checks that max_pages was negotiated: a 1 MiB write(2)
// reaches the layers as one Write, and reads come in 1 MiB requests.
func TestOneMegabyteIO(t *testing.T) {
	needFuse(t)
	rec := &ioRecorder{Base: layer.Base{Child: newStore(t)}}
	mnt := mount(t, rec, Options{})
	p := filepath.Join(mnt, "f")
	fd, err := unix.Open(p, unix.O_CREAT|unix.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	data := make([]byte, 4<<20)
	for off := 0; off < len(data); off += 1 << 20 {
		if n, err := unix.Pwrite(fd, data[off:off+1<<20], int64(off)); err != nil || n != 1<<20 {
			t.Fatalf("pwrite: %d, %v", n, err)
		}
	}
	rec.mu.Lock()
	writes := append([]int(nil), rec.writes...)
	rec.mu.Unlock()
	if len(writes) != 4 || writes[0] != 1<<20 {
		t.Fatalf("four 1 MiB write(2) calls reached the layer as writes of %v bytes", writes)
	}
	// Direct reads are not split by read-ahead: one 1 MiB read(2), one READ.
	dfd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	rec.mu.Lock()
	rec.reads = nil
	rec.mu.Unlock()
	buf := alignedBuffer(1 << 20)
	if n, err := unix.Pread(dfd, buf, 1<<20); err != nil || n != 1<<20 {
		t.Fatalf("pread: %d, %v", n, err)
	}
	rec.mu.Lock()
	if len(rec.reads) != 1 || rec.reads[0] != 1<<20 {
		t.Fatalf("a 1 MiB O_DIRECT read(2) reached the layer as reads of %v bytes", rec.reads)
	}
	rec.reads = nil
	rec.mu.Unlock()
	// Buffered reads: read-ahead asks for 1 MiB at a time.
	if _, err := os.ReadFile(p); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.reads) == 0 || rec.reads[0] != 1<<20 || len(rec.reads) > 5 {
		t.Fatalf("reading a 4 MiB file reached the layer as reads of %v bytes", rec.reads)
	}
}

func alignedBuffer(n int) []byte {
	b := make([]byte, n+4096)
	for i := range 4096 {
		if uintptrOf(b[i:])%4096 == 0 {
			return b[i : i+n]
		}
	}
	return b[:n]
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDebugLog checks that Debug sends go-fuse's request log to the
// Logger.
func TestDebugLog(t *testing.T) {
	needFuse(t)
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	mnt := mount(t, newStore(t), Options{Debug: true, Logger: log})
	if _, err := os.Stat(filepath.Join(mnt, "nothing-here")); !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, "LOOKUP") || !strings.Contains(out, "nothing-here") {
		t.Fatalf("debug log: %q", out)
	}
}

// ACL xattrs are refused by the bridge itself: no round trip to a brick
// that would refuse them too.
func TestACLRefusedLocally(t *testing.T) {
	needFuse(t)
	counts := layertest.NewCounting(newStore(t))
	mnt := mount(t, counts, Options{})
	f := filepath.Join(mnt, "f")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	counts.Reset()
	// version 2; user::rw-, group::r--, other::r-- (what cp -a sends)
	acl := []byte{2, 0, 0, 0,
		0x01, 0, 6, 0, 0xff, 0xff, 0xff, 0xff,
		0x04, 0, 4, 0, 0xff, 0xff, 0xff, 0xff,
		0x20, 0, 4, 0, 0xff, 0xff, 0xff, 0xff}
	if err := unix.Setxattr(f, "system.posix_acl_access", acl, 0); err != syscall.EOPNOTSUPP {
		t.Fatalf("setxattr of an ACL: %v, want EOPNOTSUPP", err)
	}
	if _, err := unix.Getxattr(f, "system.posix_acl_access", make([]byte, 64)); err != syscall.EOPNOTSUPP {
		t.Fatalf("getxattr of an ACL: %v, want EOPNOTSUPP", err)
	}
	if n := counts.Count("Setxattr") + counts.Count("Getxattr"); n != 0 {
		t.Fatalf("ACL xattrs reached the layer %d times", n)
	}
}
