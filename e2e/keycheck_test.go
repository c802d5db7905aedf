package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mortarfs/mortar/layer/crypt"
)

// A mount of an encrypted volume with another key than the one its files
// are encrypted with fails at once, with a message that says so, and
// leaves nothing mounted; the right key still mounts and reads.
func TestWrongVolumeKeyFailsMount(t *testing.T) {
	n := startNode(t)
	n.createVolume("enc", 2, nil, []string{"encryption", "on"})
	keys := t.TempDir()
	right, wrong := filepath.Join(keys, "right"), filepath.Join(keys, "wrong")
	for _, p := range []string{right, wrong} {
		if err := os.WriteFile(p, []byte(crypt.EncodeKey(crypt.NewKey())), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mnt := n.mount("enc", "key-file="+right)
	if err := os.WriteFile(filepath.Join(mnt, "f"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	unmount(t, mnt)

	other := mountDir(t)
	out, err := n.mortar("mount", "-o", "key-file="+wrong, n.target("enc"), other)
	if err == nil {
		unmount(t, other)
		t.Fatalf("mount with the wrong key succeeded: %s", out)
	}
	if !strings.Contains(out, "wrong volume key") {
		t.Fatalf("mount with the wrong key: %v, %q; want it to say \"wrong volume key\"", err, out)
	}
	if isMounted(other) {
		t.Fatal("a mount that failed left something mounted")
	}
	again := n.mount("enc", "key-file="+right)
	if b, err := os.ReadFile(filepath.Join(again, "f")); err != nil || string(b) != "secret" {
		t.Fatalf("read with the right key: %q, %v", b, err)
	}
}
