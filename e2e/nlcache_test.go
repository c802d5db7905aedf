package e2e

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The negative-lookup cache on two mounts of one replica-3 volume: a
// mount that made a directory answers lookups of names it lacks, and
// names made or removed through it are right at once; a name made
// through the other mount is seen once the nl-cache timeout has passed
// (polled, bounded), and making a name the other mount made fails with
// EEXIST even while this mount does not see it yet.
func TestNlCacheTwoMounts(t *testing.T) {
	n := startNode(t)
	const timeout = 0.3 // seconds
	secs := fmt.Sprint(timeout)
	n.createVolume("nl", 3, []string{"replica", "3"}, []string{
		"performance.nl-cache-timeout", secs,
		"performance.entry-timeout", secs,
		"performance.attr-timeout", secs,
	})
	a, b := n.mount("nl"), n.mount("nl")
	if err := os.Mkdir(filepath.Join(a, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		p := filepath.Join(a, "d", fmt.Sprint("f", i))
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("stat of a name not made yet: %v", err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("stat of a name just made through this mount: %v", err)
		}
	}
	if err := os.Remove(filepath.Join(a, "d", "f0")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(a, "d", "f0")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat of a name just removed through this mount: %v", err)
	}

	other := filepath.Join(b, "d", "from-b")
	if err := os.WriteFile(other, []byte("b"), 0o644); err != nil {
		t.Fatal(err)
	}
	seen := filepath.Join(a, "d", "from-b")
	if err := os.Mkdir(seen, 0o755); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("mkdir through a of a name b made: %v, want EEXIST", err)
	}
	took := waitFor(t, "a sees the name b made", 5*time.Second, func() bool {
		_, err := os.Stat(seen)
		return err == nil
	})
	if took > 2*time.Second {
		t.Errorf("a saw b's name after %v, want within about %v s", took, timeout)
	}
	t.Logf("a saw the name b made %v after", took.Round(time.Millisecond))
}
