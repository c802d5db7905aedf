package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mortarfs/mortar/layer/crypt"
)

// mortar key prints a usable key, or writes one to a new 0600 file and
// never over an existing one.
func TestKeyCommand(t *testing.T) {
	out, err := run(t, "key")
	if err != nil {
		t.Fatal(err)
	}
	if k, err := crypt.ParseKey([]byte(out)); err != nil || len(k) != crypt.KeySize {
		t.Fatalf("printed key %q: %v", out, err)
	}
	again, _ := run(t, "key")
	if again == out {
		t.Fatal("two keys are the same")
	}
	path := filepath.Join(t.TempDir(), "k")
	if _, err := run(t, "key", "--out", path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	if _, err := crypt.LoadKeyFile(path); err != nil {
		t.Fatalf("key file unreadable as a key: %v", err)
	}
	if _, err := run(t, "key", "--out", path); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("key over an existing file: %v", err)
	}
}
