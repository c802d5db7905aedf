package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mortarfs/mortar/fusebridge/posixtest"
)

// The POSIX suite on a 3-brick distribute volume mounted by the binary,
// with the default client caches, with every one on (cache invalidation
// too) and with every one off.
func TestPOSIXOnDistributeMount(t *testing.T) {
	n := startNode(t)
	for _, c := range []struct {
		name, vol string
		opts      []string
	}{
		{"defaults", "px", nil},
		{"every-cache", "pxon", []string{"features.cache-invalidation", "on"}},
		{"caches-off", "pxoff", []string{"performance.client-cache", "off"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n.createVolume(c.vol, 3, nil, c.opts)
			posixtest.Run(t, n.mount(c.vol))
		})
	}
}

// The "done when" workloads of the foundation issue: cp -a of a document
// tree, git, tar, and a SQLite database, on a volume mounted through
// mount(8) as an operator would (mount -t mortar).
func TestWorkloadsThroughMountHelper(t *testing.T) {
	need(t, "git", "sqlite3", "tar", "diff")
	n := startNode(t)
	n.volume("work", 3)
	mnt := mountDir(t)
	helper := installMountHelper(t)
	out, err := exec.Command("mount", "-t", "mortar", "-o", "log-file="+filepath.Join(n.data, "helper.log"),
		n.target("work"), mnt).CombinedOutput()
	if err != nil {
		t.Fatalf("mount -t mortar (helper %s): %v\n%s", helper, err, out)
	}
	t.Cleanup(func() { unmount(t, mnt) })
	if !isMounted(mnt) {
		t.Fatal("mount -t mortar returned but nothing is mounted")
	}

	t.Run("cp-a", func(t *testing.T) {
		sh(t, mnt, "cp -a /usr/share/doc docs")
		sh(t, mnt, "diff -r --no-dereference /usr/share/doc docs")
	})
	workloads(t, mnt)
}

// The same workloads (but cp -a) with every client cache off.
func TestWorkloadsCachesOff(t *testing.T) {
	need(t, "git", "sqlite3", "tar", "diff")
	n := startNode(t)
	n.createVolume("workoff", 3, nil, []string{"performance.client-cache", "off"})
	workloads(t, n.mount("workoff"))
}

// workloads untars a tree with links, runs git and SQLite in mnt.
func workloads(t *testing.T, mnt string) {
	t.Run("tar", func(t *testing.T) {
		src := t.TempDir()
		sh(t, src, "mkdir -p a/b && seq 1 100000 > a/b/nums && ln -s b/nums a/link && ln a/b/nums a/hard && chmod 640 a/b/nums")
		sh(t, src, "tar cf "+filepath.Join(src, "t.tar")+" a")
		sh(t, mnt, "mkdir untar && cd untar && tar xpf "+filepath.Join(src, "t.tar"))
		sh(t, mnt, "diff -r --no-dereference "+filepath.Join(src, "a")+" untar/a")
		// tar p restores modes, owners and times: the attribute changes
		// the mount keeps with a file's writes must land, after them.
		attrs := "find a \\( -type f -o -type d \\) -exec stat -c '%n %a %u %g %Y %s' {} + | sort"
		if want, got := sh(t, src, attrs), sh(t, filepath.Join(mnt, "untar"), attrs); got != want {
			t.Errorf("attributes after tar xp:\n%s\nwant:\n%s", got, want)
		}
		if out := sh(t, mnt, "stat -c %h untar/a/hard"); strings.TrimSpace(out) != "2" {
			t.Errorf("hard link from tar has link count %s", out)
		}
	})
	t.Run("git", func(t *testing.T) {
		sh(t, mnt, `mkdir repo && cd repo && git init -q && git config user.email t@example.com && git config user.name t &&
			seq 1 1000 > f && git add f && git commit -qm one && mkdir d && echo x > d/y && git add -A && git commit -qm two &&
			git mv f g && git commit -qm three && git gc -q && git fsck --strict`)
		if out := sh(t, filepath.Join(mnt, "repo"), "git log --oneline | wc -l"); strings.TrimSpace(out) != "3" {
			t.Errorf("git log shows %s commits, want 3", out)
		}
	})
	t.Run("sqlite", func(t *testing.T) {
		sh(t, mnt, `sqlite3 db.sqlite "create table t(id integer primary key, v text);"`)
		sh(t, mnt, `for i in $(seq 1 20); do sqlite3 db.sqlite "begin; insert into t(v) select hex(randomblob(100)) from (with recursive c(x) as (select 1 union all select x+1 from c limit 100) select x from c); commit;"; done`)
		out := sh(t, mnt, `sqlite3 db.sqlite "pragma integrity_check; select count(*) from t;"`)
		if out != "ok\n2000\n" {
			t.Errorf("sqlite says %q, want ok and 2000 rows", out)
		}
		sh(t, mnt, `sqlite3 db.sqlite "pragma journal_mode=wal; update t set v = 'x' where id % 2 = 0;"`)
		if out := sh(t, mnt, `sqlite3 db.sqlite "select count(*) from t where v = 'x';"`); out != "1000\n" {
			t.Errorf("after the WAL update: %q", out)
		}
	})
}

// installMountHelper makes /sbin/mount.mortar point to the binary under
// test (mount(8) only looks in /sbin), restoring what was there.
func installMountHelper(t *testing.T) string {
	t.Helper()
	const helper = "/sbin/mount.mortar"
	old, err := os.Readlink(helper)
	hadOld := err == nil
	if _, statErr := os.Lstat(helper); statErr == nil && !hadOld {
		t.Fatalf("%s exists and is not a symlink; not touching it", helper)
	}
	os.Remove(helper)
	if err := os.Symlink(mortarBin, helper); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.Remove(helper)
		if hadOld {
			os.Symlink(old, helper)
		}
	})
	return helper
}

// An /etc/fstab line mounts the volume (tested with mount -T on a private
// fstab file, so the machine's own is not touched).
func TestFstabLine(t *testing.T) {
	n := startNode(t)
	n.volume("tab", 2)
	installMountHelper(t)
	mnt := mountDir(t)
	fstab := filepath.Join(t.TempDir(), "fstab")
	line := n.target("tab") + " " + mnt + " mortar defaults,_netdev,log-file=" + filepath.Join(n.data, "fstab.log") + " 0 0\n"
	if err := os.WriteFile(fstab, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-T", fstab, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount -T %s %s: %v\n%s", fstab, mnt, err, out)
	}
	t.Cleanup(func() { unmount(t, mnt) })
	sh(t, mnt, "echo via-fstab > f && test \"$(cat f)\" = via-fstab")
	if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v %s", err, out)
	}
}
