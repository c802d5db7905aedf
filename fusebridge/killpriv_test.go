package fusebridge

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// asNobody runs a shell command as uid/gid 65534 without capabilities.
func asNobody(t *testing.T, script string) {
	t.Helper()
	out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
		"sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %s: %v: %s", script, err, out)
	}
}

// Set-user-ID and set-group-ID bits go as on a local file system: a
// write or a truncate by an unprivileged user clears them (buffered and
// O_DIRECT), and so does a chown, even by root. (An executable's
// set-group-ID goes only with group execute.)
func TestSuidCleared(t *testing.T) {
	needFuse(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv")
	}
	mnt := mount(t, newStore(t), Options{})
	mk := func(name string) string {
		t.Helper()
		p := filepath.Join(mnt, name)
		if err := os.WriteFile(p, []byte("0123456789"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Chmod(p, 0o6775); err != nil { // os.Chmod takes os.ModeSetuid, not 04000
			t.Fatal(err)
		}
		if st, err := os.Stat(p); err != nil || st.Mode()&(os.ModeSetuid|os.ModeSetgid) != os.ModeSetuid|os.ModeSetgid {
			t.Fatalf("chmod 6775 gave %v, %v", st.Mode(), err)
		}
		return p
	}
	cleared := func(what, p string) {
		t.Helper()
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s: mode %v, want set-user-ID and set-group-ID cleared", what, st.Mode())
		}
	}
	w := mk("w")
	asNobody(t, "echo more >> "+w)
	cleared("buffered write by its unprivileged owner", w)
	d := mk("d")
	asNobody(t, "dd if=/dev/zero of="+d+" bs=4096 count=1 oflag=direct conv=notrunc status=none")
	cleared("O_DIRECT write by its unprivileged owner", d)
	tr := mk("tr")
	asNobody(t, "truncate -s 3 "+tr)
	cleared("truncate by its unprivileged owner", tr)
	c := mk("c")
	if err := os.Chown(c, 0, 0); err != nil {
		t.Fatal(err)
	}
	cleared("chown by root", c)
}
