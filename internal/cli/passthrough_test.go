package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPassthroughRefuses: mortar passthrough checks its directories
// before mounting anything.
func TestPassthroughRefuses(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	file := filepath.Join(dir, "file")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"passthrough", dir}, "usage"},
		{[]string{"passthrough", filepath.Join(dir, "none"), sub}, "no such file"},
		{[]string{"passthrough", file, sub}, "not a directory"},
		{[]string{"passthrough", sub, file}, "not a directory"},
		{[]string{"passthrough", dir, sub}, "inside the other"},
		{[]string{"passthrough", sub, dir}, "inside the other"},
		{[]string{"passthrough", dir, dir}, "inside the other"},
	} {
		if _, err := run(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error with %q", c.args, err, c.want)
		}
	}
}
