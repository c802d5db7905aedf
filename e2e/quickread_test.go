package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Quick-read on two mounts of one volume (replica 3, disperse 4+2): files
// of every size around the page and the quick-read limit read back byte
// for byte through both mounts, a rewrite is read at once through the
// mount that made it, and through the other one once the quick-read and
// kernel timeouts have passed.
func TestQuickReadTwoMounts(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) { quickReadTwoMounts(t, l.bricks, l.keywords) })
	}
}

func quickReadTwoMounts(t *testing.T, nbricks int, keywords []string) {
	n := startNode(t)
	const timeout = 0.2 // seconds: quick-read, attributes, names
	secs := fmt.Sprint(timeout)
	n.createVolume("qr", nbricks, keywords, []string{
		"performance.quick-read-cache-timeout", secs,
		"performance.attr-timeout", secs,
		"performance.entry-timeout", secs,
	})
	a, b := n.mount("qr"), n.mount("qr")

	for i, size := range []int{0, 1, 4095, 4096, 65536, 65537} {
		name := fmt.Sprintf("size-%d", size)
		want := randomFile(t, a, name, size, int64(i))
		for _, mnt := range []string{a, b, a} {
			got, err := os.ReadFile(filepath.Join(mnt, name))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s through %s: %d bytes, %v; want %d bytes as written", name, mnt, len(got), err, size)
			}
		}
	}

	// The same size each time: the content, not the size, must change.
	note := func(mnt string) string {
		got, err := os.ReadFile(filepath.Join(mnt, "note"))
		if err != nil {
			t.Fatal(err)
		}
		return string(got)
	}
	if err := os.WriteFile(filepath.Join(a, "note"), []byte("version 1"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b reads the note", 5*time.Second, func() bool { return note(b) == "version 1" })
	for v := 2; v <= 4; v++ {
		text := fmt.Sprintf("version %d", v)
		if err := os.WriteFile(filepath.Join(a, "note"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := note(a); got != text {
			t.Fatalf("a reads %q right after writing %q", got, text)
		}
		took := waitFor(t, "b reads "+text, 5*time.Second, func() bool { return note(b) == text })
		t.Logf("b read %q %s after a wrote it", text, took.Round(time.Millisecond))
	}
}
