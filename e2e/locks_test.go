package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// Two mounts of a replica-3 volume increment one counter file, each under
// a POSIX write lock of a lock file, 100 times each and at once: the lock
// passes between them (a client holding it under a lease hands it back
// when the other asks), so no increment is lost. Quick-read is off and
// the kernel's attribute cache too, so that what one wrote under the lock
// (sent at its close) is what the other reads under it.
func TestLockedCounterOnTwoMounts(t *testing.T) {
	n := startNode(t)
	n.createVolume("lockc", 3, []string{"replica", "3"}, []string{"performance.quick-read", "off"})
	mounts := []string{
		n.mount("lockc", "attr-timeout=0,entry-timeout=0"),
		n.mount("lockc", "attr-timeout=0,entry-timeout=0"),
	}
	if err := os.WriteFile(filepath.Join(mounts[0], "counter"), []byte(fmt.Sprintf("%08d", 0)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mounts[0], "lock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	const rounds = 100
	errs := make(chan error, len(mounts))
	var wg sync.WaitGroup
	for _, m := range mounts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- increment(m, rounds)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(filepath.Join(mounts[1], "counter"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%08d", rounds*len(mounts)); string(got) != want {
		t.Fatalf("counter is %s after %d locked increments, want %s: the lock let two holders in", got, rounds*len(mounts), want)
	}
}

// increment adds one to the counter in mnt, rounds times, each under a
// write lock of mnt/lock taken with F_SETLKW.
func increment(mnt string, rounds int) error {
	lf, err := os.OpenFile(filepath.Join(mnt, "lock"), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer lf.Close()
	counter := filepath.Join(mnt, "counter")
	for range rounds {
		lk := unix.Flock_t{Type: unix.F_WRLCK}
		if err := unix.FcntlFlock(lf.Fd(), unix.F_SETLKW, &lk); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		b, err := os.ReadFile(counter)
		if err != nil {
			return err
		}
		v, err := strconv.Atoi(string(b))
		if err != nil {
			return fmt.Errorf("counter %q: %w", b, err)
		}
		if err := os.WriteFile(counter, []byte(fmt.Sprintf("%08d", v+1)), 0o644); err != nil {
			return err
		}
		lk.Type = unix.F_UNLCK
		if err := unix.FcntlFlock(lf.Fd(), unix.F_SETLK, &lk); err != nil {
			return fmt.Errorf("unlock: %w", err)
		}
	}
	return nil
}
