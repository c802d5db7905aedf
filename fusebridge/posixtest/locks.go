package posixtest

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// helperEnv carries a LockRequest to a helper process.
const helperEnv = "MORTAR_POSIXTEST_LOCK_HELPER"

// LockRequest is a lock operation for a helper process.
type LockRequest struct {
	Op    string // "setlk", "setlkw", "getlk" (fcntl) or "flock"
	Path  string
	Type  int16 // fcntl: F_RDLCK, F_WRLCK, F_UNLCK
	Start int64 // fcntl: range; Len 0 means to end of file
	Len   int64
	How   int  // flock: LOCK_SH, LOCK_EX, LOCK_UN, with LOCK_NB
	Hold  bool // keep the process, and its locks, until told to go
}

// LockResult is what the helper process got.
type LockResult struct {
	Errno syscall.Errno // 0 on success
	// getlk: the conflicting lock (Type F_UNLCK if none).
	Type       int16
	Start, Len int64
	Pid        int32
}

// HelperMain makes this process a lock helper when the suite started it as
// one: it does the requested operation, prints the result and exits. Call
// it first thing in TestMain.
func HelperMain() {
	s := os.Getenv(helperEnv)
	if s == "" {
		return
	}
	var req LockRequest
	if err := json.Unmarshal([]byte(s), &req); err != nil {
		os.Exit(3)
	}
	res := doLock(&req)
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		os.Exit(3)
	}
	if req.Hold {
		io.Copy(io.Discard, os.Stdin) // until the parent closes it
	}
	os.Exit(0)
}

func doLock(req *LockRequest) LockResult {
	fd, err := unix.Open(req.Path, unix.O_RDWR, 0)
	if err != nil {
		return LockResult{Errno: errno(err)}
	}
	switch req.Op {
	case "flock":
		return LockResult{Errno: errno(unix.Flock(fd, req.How))}
	case "setlk", "setlkw":
		cmd := unix.F_SETLK
		if req.Op == "setlkw" {
			cmd = unix.F_SETLKW
		}
		lk := unix.Flock_t{Type: req.Type, Whence: 0, Start: req.Start, Len: req.Len}
		return LockResult{Errno: errno(unix.FcntlFlock(uintptr(fd), cmd, &lk))}
	case "getlk":
		lk := unix.Flock_t{Type: req.Type, Whence: 0, Start: req.Start, Len: req.Len}
		err := unix.FcntlFlock(uintptr(fd), unix.F_GETLK, &lk)
		return LockResult{Errno: errno(err), Type: lk.Type, Start: lk.Start, Len: lk.Len, Pid: lk.Pid}
	}
	return LockResult{Errno: unix.EINVAL}
}

func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return unix.EIO
}

// OtherProcess runs req in a helper process and returns its result; the
// helper has exited (and lost its locks) when it returns.
func OtherProcess(t *testing.T, req LockRequest) LockResult {
	t.Helper()
	req.Hold = false
	res, release := startHelper(t, req)
	release()
	return res
}

// HoldInOtherProcess runs req in a helper process that keeps its locks
// until release is called (at the latest when the test ends).
func HoldInOtherProcess(t *testing.T, req LockRequest) (res LockResult, release func()) {
	t.Helper()
	req.Hold = true
	return startHelper(t, req)
}

// helperCmd is the command of a helper process for req.
func helperCmd(t *testing.T, req LockRequest) *exec.Cmd {
	t.Helper()
	js, err := json.Marshal(req)
	noErr(t, "marshal", err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(js))
	return cmd
}

func startHelper(t *testing.T, req LockRequest) (LockResult, func()) {
	t.Helper()
	cmd := helperCmd(t, req)
	stdin, err := cmd.StdinPipe()
	noErr(t, "stdin pipe", err)
	stdout, err := cmd.StdoutPipe()
	noErr(t, "stdout pipe", err)
	noErr(t, "start helper", cmd.Start())
	var once bool
	release := func() {
		if !once {
			once = true
			stdin.Close()
			cmd.Wait()
		}
	}
	t.Cleanup(release)

	line := make(chan []byte, 1)
	go func() {
		b, _ := bufio.NewReader(stdout).ReadBytes('\n')
		line <- b
	}()
	var b []byte
	select {
	case b = <-line:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("lock helper did not answer %+v", req)
	}
	var res LockResult
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("lock helper answered %q to %+v: does TestMain call posixtest.HelperMain?", b, req)
	}
	return res, release
}

// setlk takes or releases an fcntl lock in this process.
func setlk(t *testing.T, fd int, typ int16, start, length int64) {
	t.Helper()
	lk := unix.Flock_t{Type: typ, Start: start, Len: length}
	noErr(t, "F_SETLK", unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &lk))
}

// wantOther checks the errno another process gets for a lock request.
func wantOther(t *testing.T, req LockRequest, want ...syscall.Errno) {
	t.Helper()
	got := OtherProcess(t, req).Errno
	for _, w := range want {
		if got == w {
			return
		}
	}
	t.Fatalf("%s %+v from another process: errno %d (%v), want %v", req.Op, req, got, got, want)
}

func lockFile(t *testing.T, dir string) (string, int) {
	p := filepath.Join(dir, "lockfile")
	writeFile(t, p, make([]byte, 200), 0o644)
	return p, open(t, p, unix.O_RDWR, 0)
}

func testPosixLocks(t *testing.T, dir string) {
	p, fd := lockFile(t, dir)
	wr := func(start, length int64) LockRequest {
		return LockRequest{Op: "setlk", Path: p, Type: unix.F_WRLCK, Start: start, Len: length}
	}
	rd := func(start, length int64) LockRequest {
		return LockRequest{Op: "setlk", Path: p, Type: unix.F_RDLCK, Start: start, Len: length}
	}
	setlk(t, fd, unix.F_WRLCK, 0, 100)
	wantOther(t, wr(50, 10), unix.EAGAIN, unix.EACCES)
	wantOther(t, rd(99, 1), unix.EAGAIN, unix.EACCES)
	wantOther(t, wr(100, 100), 0)

	got := OtherProcess(t, LockRequest{Op: "getlk", Path: p, Type: unix.F_WRLCK, Start: 0, Len: 10})
	if got.Errno != 0 || got.Type != unix.F_WRLCK || got.Start != 0 || got.Len != 100 {
		t.Fatalf("F_GETLK from another process: %+v", got)
	}
	if got.Pid != int32(os.Getpid()) {
		t.Errorf("F_GETLK pid %d, want %d", got.Pid, os.Getpid())
	}
	own := unix.Flock_t{Type: unix.F_WRLCK, Start: 0, Len: 10}
	noErr(t, "F_GETLK", unix.FcntlFlock(uintptr(fd), unix.F_GETLK, &own))
	if own.Type != unix.F_UNLCK {
		t.Fatalf("own lock conflicts with itself: %+v", own)
	}

	setlk(t, fd, unix.F_RDLCK, 0, 100) // downgrade
	wantOther(t, rd(0, 10), 0)
	wantOther(t, wr(0, 10), unix.EAGAIN, unix.EACCES)

	setlk(t, fd, unix.F_UNLCK, 0, 50) // split
	wantOther(t, wr(0, 50), 0)
	wantOther(t, wr(50, 10), unix.EAGAIN, unix.EACCES)

	setlk(t, fd, unix.F_WRLCK, 1000, 0) // to end of file, and beyond
	wantOther(t, wr(1<<40, 1), unix.EAGAIN, unix.EACCES)
	got = OtherProcess(t, LockRequest{Op: "getlk", Path: p, Type: unix.F_RDLCK, Start: 5000, Len: 1})
	if got.Type != unix.F_WRLCK || got.Start != 1000 || got.Len != 0 {
		t.Fatalf("F_GETLK of lock to EOF: %+v", got)
	}
	setlk(t, fd, unix.F_UNLCK, 0, 0)
	wantOther(t, wr(0, 0), 0)
}

func testPosixLocksWait(t *testing.T, dir string) {
	p, fd := lockFile(t, dir)
	res, release := HoldInOtherProcess(t, LockRequest{Op: "setlk", Path: p, Type: unix.F_WRLCK, Start: 0, Len: 10})
	if res.Errno != 0 {
		t.Fatalf("helper lock: %v", res.Errno)
	}
	done := make(chan error, 1)
	go func() {
		lk := unix.Flock_t{Type: unix.F_WRLCK, Start: 5, Len: 1}
		done <- unix.FcntlFlock(uintptr(fd), unix.F_SETLKW, &lk)
	}()
	select {
	case err := <-done:
		t.Fatalf("F_SETLKW returned while another process held the lock: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	release()
	select {
	case err := <-done:
		noErr(t, "F_SETLKW", err)
	case <-time.After(10 * time.Second):
		t.Fatal("F_SETLKW not granted after the holder exited")
	}
	wantOther(t, LockRequest{Op: "setlk", Path: p, Type: unix.F_RDLCK, Start: 5, Len: 1}, unix.EAGAIN, unix.EACCES)
}

func testPosixLocksClose(t *testing.T, dir string) {
	p, fd := lockFile(t, dir)
	setlk(t, fd, unix.F_WRLCK, 0, 0)
	wr := LockRequest{Op: "setlk", Path: p, Type: unix.F_WRLCK, Start: 0, Len: 0}
	wantOther(t, wr, unix.EAGAIN, unix.EACCES)
	// Closing any descriptor of the file drops the process's locks on it.
	fd2, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	noErr(t, "open", err)
	noErr(t, "close", unix.Close(fd2))
	wantOther(t, wr, 0)
}

// testPosixLocksKilledWaiter: a process killed while it waits for a lock
// does not get it later.
func testPosixLocksKilledWaiter(t *testing.T, dir string) {
	p, fd := lockFile(t, dir)
	setlk(t, fd, unix.F_WRLCK, 0, 10)
	cmd := helperCmd(t, LockRequest{Op: "setlkw", Path: p, Type: unix.F_WRLCK, Start: 0, Len: 10})
	noErr(t, "start helper", cmd.Start())
	time.Sleep(300 * time.Millisecond) // let it block
	noErr(t, "kill helper", cmd.Process.Kill())
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("a process killed in F_SETLKW does not exit: the file system ignores the interrupt")
	}
	setlk(t, fd, unix.F_UNLCK, 0, 10)
	wr := LockRequest{Op: "setlk", Path: p, Type: unix.F_WRLCK, Start: 0, Len: 10}
	deadline := time.Now().Add(5 * time.Second)
	for OtherProcess(t, wr).Errno != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the range stays locked after its waiter was killed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func flockReq(p string, how int) LockRequest {
	return LockRequest{Op: "flock", Path: p, How: how}
}

func testFlock(t *testing.T, dir string) {
	p, fd1 := lockFile(t, dir)
	noErr(t, "flock EX", unix.Flock(fd1, unix.LOCK_EX))
	wantOther(t, flockReq(p, unix.LOCK_EX|unix.LOCK_NB), unix.EWOULDBLOCK)
	wantOther(t, flockReq(p, unix.LOCK_SH|unix.LOCK_NB), unix.EWOULDBLOCK)
	// flock locks belong to the open file description, not the process.
	fd2 := open(t, p, unix.O_RDWR, 0)
	wantErrno(t, "flock from a second open", unix.Flock(fd2, unix.LOCK_EX|unix.LOCK_NB), unix.EWOULDBLOCK)

	noErr(t, "flock UN", unix.Flock(fd1, unix.LOCK_UN))
	wantOther(t, flockReq(p, unix.LOCK_EX|unix.LOCK_NB), 0)

	noErr(t, "flock SH", unix.Flock(fd1, unix.LOCK_SH))
	noErr(t, "flock SH second open", unix.Flock(fd2, unix.LOCK_SH|unix.LOCK_NB))
	wantOther(t, flockReq(p, unix.LOCK_SH|unix.LOCK_NB), 0)
	wantOther(t, flockReq(p, unix.LOCK_EX|unix.LOCK_NB), unix.EWOULDBLOCK)
	noErr(t, "flock UN", unix.Flock(fd1, unix.LOCK_UN))
	noErr(t, "flock UN", unix.Flock(fd2, unix.LOCK_UN))

	// A duplicated descriptor shares the lock; it goes with the last close.
	fd3, err := unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC, 0)
	noErr(t, "open", err)
	noErr(t, "flock EX", unix.Flock(fd3, unix.LOCK_EX))
	fd4, err := unix.Dup(fd3)
	noErr(t, "dup", err)
	noErr(t, "close", unix.Close(fd3))
	wantOther(t, flockReq(p, unix.LOCK_EX|unix.LOCK_NB), unix.EWOULDBLOCK)
	noErr(t, "close dup", unix.Close(fd4))
	deadline := time.Now().Add(5 * time.Second) // the release is asynchronous
	for OtherProcess(t, flockReq(p, unix.LOCK_EX|unix.LOCK_NB)).Errno != 0 {
		if time.Now().After(deadline) {
			t.Fatal("flock still held after the last descriptor was closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testFlockWait(t *testing.T, dir string) {
	p, fd := lockFile(t, dir)
	res, release := HoldInOtherProcess(t, flockReq(p, unix.LOCK_EX))
	if res.Errno != 0 {
		t.Fatalf("helper flock: %v", res.Errno)
	}
	done := make(chan error, 1)
	go func() { done <- unix.Flock(fd, unix.LOCK_SH) }()
	select {
	case err := <-done:
		t.Fatalf("flock returned while another process held it: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	release()
	select {
	case err := <-done:
		noErr(t, "flock", err)
	case <-time.After(10 * time.Second):
		t.Fatal("flock not granted after the holder exited")
	}
	wantOther(t, flockReq(p, unix.LOCK_EX|unix.LOCK_NB), unix.EWOULDBLOCK)
}

// testFlockIndependent: on Linux flock and fcntl locks do not see each
// other.
func testFlockIndependent(t *testing.T, dir string) {
	p, fd := lockFile(t, dir)
	noErr(t, "flock EX", unix.Flock(fd, unix.LOCK_EX))
	wantOther(t, LockRequest{Op: "setlk", Path: p, Type: unix.F_WRLCK}, 0)
	noErr(t, "flock UN", unix.Flock(fd, unix.LOCK_UN))
	setlk(t, fd, unix.F_WRLCK, 0, 0)
	wantOther(t, flockReq(p, unix.LOCK_EX|unix.LOCK_NB), 0)
}
