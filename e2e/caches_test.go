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

// overwrite writes s at the start of the existing file p, without
// truncating it: a change only its inode's notice (or a timeout) tells
// another mount whose kernel keeps the page cache across opens.
func overwrite(p, s string) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt([]byte(s), 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// walkFinds lists dir, then its subdirectory s1, as a walk does (the
// mount reads the listing of s2 ahead), then s2, and reports whether that
// listing has name.
func walkFinds(dir, name string) bool {
	for _, d := range []string{dir, filepath.Join(dir, "s1")} {
		if _, err := os.ReadDir(d); err != nil {
			return false
		}
	}
	sub, base := filepath.Split(name)
	entries, err := os.ReadDir(filepath.Join(dir, sub))
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.Name() == base {
			return true
		}
	}
	return false
}

// cacheCase is a change made through one mount and how another mount
// tells it has seen it.
type cacheCase struct {
	name   string
	prep   func(a string) error // through mount a, before b looks
	change func(a string) error // through mount a
	seen   func(b string) bool  // through mount b
}

func cacheCases() []cacheCase {
	write := func(p, s string) error { return os.WriteFile(p, []byte(s), 0o644) }
	content := func(p, s string) bool { got, err := os.ReadFile(p); return err == nil && string(got) == s }
	gone := func(p string) bool { _, err := os.Stat(p); return errors.Is(err, fs.ErrNotExist) }
	return []cacheCase{
		{"new file", nil,
			func(a string) error { return write(filepath.Join(a, "new"), "n") },
			func(b string) bool { return content(filepath.Join(b, "new"), "n") }},
		{"write", func(a string) error { return write(filepath.Join(a, "w"), "one") },
			func(a string) error { return write(filepath.Join(a, "w"), "two") },
			func(b string) bool { return content(filepath.Join(b, "w"), "two") }},
		{"overwrite in place", func(a string) error { return write(filepath.Join(a, "o"), "one") },
			func(a string) error { return overwrite(filepath.Join(a, "o"), "two") },
			func(b string) bool { return content(filepath.Join(b, "o"), "two") }},
		{"truncate", func(a string) error { return write(filepath.Join(a, "t"), "longer") },
			func(a string) error { return os.Truncate(filepath.Join(a, "t"), 2) },
			func(b string) bool { return content(filepath.Join(b, "t"), "lo") }},
		{"rename", func(a string) error { return write(filepath.Join(a, "r1"), "r") },
			func(a string) error { return os.Rename(filepath.Join(a, "r1"), filepath.Join(a, "r2")) },
			func(b string) bool { return gone(filepath.Join(b, "r1")) && content(filepath.Join(b, "r2"), "r") }},
		{"unlink", func(a string) error { return write(filepath.Join(a, "u"), "u") },
			func(a string) error { return os.Remove(filepath.Join(a, "u")) },
			func(b string) bool { return gone(filepath.Join(b, "u")) }},
		{"chmod of a directory", func(a string) error { return os.Mkdir(filepath.Join(a, "cd"), 0o755) },
			func(a string) error { return os.Chmod(filepath.Join(a, "cd"), 0o700) },
			func(b string) bool {
				st, err := os.Stat(filepath.Join(b, "cd"))
				return err == nil && st.Mode().Perm() == 0o700
			}},
		{"new name in a tree being walked", func(a string) error {
			if err := os.MkdirAll(filepath.Join(a, "lw", "s1"), 0o755); err != nil {
				return err
			}
			return os.Mkdir(filepath.Join(a, "lw", "s2"), 0o755)
		},
			func(a string) error { return write(filepath.Join(a, "lw", "s2", "n"), "n") },
			func(b string) bool { return walkFinds(filepath.Join(b, "lw"), "s2/n") }},
		{"chmod", func(a string) error { return write(filepath.Join(a, "c"), "c") },
			func(a string) error { return os.Chmod(filepath.Join(a, "c"), 0o600) },
			func(b string) bool {
				st, err := os.Stat(filepath.Join(b, "c"))
				return err == nil && st.Mode().Perm() == 0o600
			}},
	}
}

// Two mounts of one replica-3 volume with every client cache on (short
// timeouts): each change made through one is seen by the other within
// the timeout (with slack for a loaded machine). With
// performance.client-cache off, each is seen at once.
func TestCachesTwoMounts(t *testing.T) {
	const timeout = 0.3 // seconds
	secs := fmt.Sprint(timeout)
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("caches on %v", on), func(t *testing.T) {
			n := startNode(t)
			opts := []string{
				"performance.attr-timeout", secs, "performance.entry-timeout", secs,
				"performance.quick-read-cache-timeout", secs, "performance.nl-cache-timeout", secs,
				"performance.md-cache-timeout", secs,
			}
			if !on {
				opts = []string{"performance.client-cache", "off"}
			}
			n.createVolume("cc", 3, []string{"replica", "3"}, opts)
			a, b := n.mount("cc"), n.mount("cc")
			for _, c := range cacheCases() {
				if c.prep != nil {
					if err := c.prep(a); err != nil {
						t.Fatal(err)
					}
				}
				c.seen(b) // b looks first: whatever it caches must not outlive the bound
				if err := c.change(a); err != nil {
					t.Fatalf("%s through a: %v", c.name, err)
				}
				if !on {
					if !c.seen(b) {
						t.Errorf("%s: not seen through b at once with the client caches off", c.name)
					}
					continue
				}
				took := waitFor(t, c.name+" seen through b", 5*time.Second, func() bool { return c.seen(b) })
				if took > 2*time.Second {
					t.Errorf("%s: seen through b after %v, want within about %v s", c.name, took, timeout)
				}
				t.Logf("%s: seen through b after %v", c.name, took.Round(time.Millisecond))
			}
		})
	}
}
