package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mortarfs/mortar/internal/kernelcache"
)

// Two mounts of one volume with every cache on and timeouts of a minute
// (the kernel's, quick-read's, nl-cache's, md-cache's): with
// features.cache-invalidation on, each change made through one mount is
// seen through the other at once (well within 2 s, where the caches
// alone would hide it for a minute), on every volume type.
func TestCacheInvalidationTwoMounts(t *testing.T) {
	for _, v := range []struct {
		name     string
		bricks   int
		keywords []string
	}{
		{"replica 3", 3, []string{"replica", "3"}},
		{"disperse 3", 3, []string{"disperse", "3", "redundancy", "1"}},
		{"distribute 3", 3, nil},
	} {
		t.Run(v.name, func(t *testing.T) {
			n := startNode(t)
			opts := longCaches("features.cache-invalidation", "on")
			if v.keywords != nil && v.keywords[0] == "disperse" {
				opts = opts[2:] // no quick-read on fragments
			}
			n.createVolume("ci", v.bricks, v.keywords, opts)
			a, b := n.mount("ci"), n.mount("ci")
			for _, c := range cacheCases() {
				if c.prep != nil {
					if err := c.prep(a); err != nil {
						t.Fatal(err)
					}
				}
				c.seen(b) // b looks first and caches what it can
				if err := c.change(a); err != nil {
					t.Fatalf("%s through a: %v", c.name, err)
				}
				took := waitFor(t, c.name+" seen through b", 10*time.Second, func() bool { return c.seen(b) })
				if took > 2*time.Second {
					t.Errorf("%s: seen through b after %v, want at once", c.name, took)
				}
				t.Logf("%s: seen through b after %v", c.name, took.Round(time.Millisecond))
			}
		})
	}
}

// The control of TestCacheInvalidationTwoMounts: with the option off,
// the same caches hide a chmod and a new name made through the other
// mount past a second (so that the test above measures the notices, not
// timeouts that do not hold).
func TestCachesHideChangesWithoutInvalidation(t *testing.T) {
	kernelcache.Hold(t) // no other test process drops the kernel's caches meanwhile
	n := startNode(t)
	n.createVolume("nc", 3, []string{"replica", "3"}, longCaches())
	a, b := n.mount("nc"), n.mount("nc")
	if err := os.WriteFile(filepath.Join(a, "c"), []byte("c"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(b, "c")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(b, "new")); err == nil {
		t.Fatal("new exists before it is made")
	}
	if err := os.Chmod(filepath.Join(a, "c"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a, "new"), []byte("n"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the claim is about a bound: it must pass
	if st, err := os.Stat(filepath.Join(b, "c")); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("chmod through a seen through b within a second without invalidation (%v, %v): the caches do not hold", st, err)
	}
	if _, err := os.Stat(filepath.Join(b, "new")); err == nil {
		t.Error("a new name through a seen through b within a second without invalidation: the caches do not hold")
	}
}

// longCaches is the volume options that make every client cache hold a
// minute, then extra.
func longCaches(extra ...string) []string {
	return append([]string{
		"performance.quick-read-cache-timeout", "60",
		"performance.attr-timeout", "60", "performance.entry-timeout", "60", "performance.nl-cache-timeout", "60",
		"performance.md-cache-timeout", "60",
	}, extra...)
}
