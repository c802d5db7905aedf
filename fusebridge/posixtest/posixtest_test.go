package posixtest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMain(m *testing.M) {
	HelperMain()
	os.Exit(m.Run())
}

// TestLocalDir runs the suite on a plain local directory: a check of the
// suite itself.
func TestLocalDir(t *testing.T) {
	Run(t, SearchableTempDir(t))
}

// SearchableTempDir is t.TempDir made searchable by every user (the Access
// test runs commands as another user).
func SearchableTempDir(t *testing.T) string {
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}
