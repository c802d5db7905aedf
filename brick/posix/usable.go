package posix

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// A directory becomes a brick only if mortar can keep its promises there
// and nothing of the machine's own is put at risk: fit says why it never
// can, needsForce why it can only with force (Mark and CheckNew ask both).

// systemDirs are never bricks, even with force: the machine's own
// directories (a brick's files are served to clients and its root gets
// mortar's xattrs and hidden directory). Directories below them are
// fine, except below the pseudo file systems, which statfs catches.
var systemDirs = []string{
	"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64",
	"/libx32", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp",
	"/usr", "/var", "/var/lib", "/var/log", "/var/run", "/var/tmp", "/var/lib/mortar",
}

// unfitFS are the file systems a brick may not live on, by statfs magic:
// pseudo file systems, and network or FUSE ones (a mortar mount among
// them), whose xattrs, locks and crash behaviour a brick cannot rely on.
var unfitFS = map[int64]string{
	unix.PROC_SUPER_MAGIC: "proc", unix.SYSFS_MAGIC: "sysfs", unix.DEVPTS_SUPER_MAGIC: "devpts",
	unix.CGROUP_SUPER_MAGIC: "cgroup", unix.CGROUP2_SUPER_MAGIC: "cgroup2", unix.DEBUGFS_MAGIC: "debugfs",
	unix.TRACEFS_MAGIC: "tracefs", unix.SECURITYFS_MAGIC: "securityfs", unix.BPF_FS_MAGIC: "bpf",
	unix.NFS_SUPER_MAGIC: "nfs", unix.SMB_SUPER_MAGIC: "smb", unix.SMB2_SUPER_MAGIC: "smb2",
	unix.CIFS_SUPER_MAGIC: "cifs", unix.FUSE_SUPER_MAGIC: "fuse", unix.PSTOREFS_MAGIC: "pstore",
	unix.EFIVARFS_MAGIC: "efivarfs", unix.HUGETLBFS_MAGIC: "hugetlbfs",
	unix.NSFS_MAGIC: "nsfs", unix.SELINUX_MAGIC: "selinuxfs",
}

// xattrProbe is set and removed to check that the file system keeps
// trusted xattrs.
const xattrProbe = "trusted.mortar.probe"

// fit says why the directory abs (absolute, symlinks resolved) can never
// become a brick, force or not, or nil: it is a system directory, at or
// inside one of forbidden (the node's data directory), on a pseudo,
// network or FUSE file system, or on one without trusted xattrs.
func fit(abs string, forbidden ...string) error {
	if err := notSystem(abs, forbidden); err != nil {
		return err
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(abs, &sfs); err != nil {
		return fmt.Errorf("%s: %w", abs, err)
	}
	if name, bad := unfitFS[int64(sfs.Type)]; bad {
		return fmt.Errorf("%s is on a %s file system, which cannot hold a brick (even with force): use a directory of a local disk", abs, name)
	}
	if err := unix.Setxattr(abs, xattrProbe, []byte("1"), 0); err != nil {
		return fmt.Errorf("%s: its file system does not keep trusted xattrs (%v), which a brick needs (even with force)", abs, err)
	}
	unix.Removexattr(abs, xattrProbe) //nolint:errcheck // it was just set
	return nil
}

// needsForce says why abs may become a brick only with force, or nil: it
// holds anything, it is on the root file system. It gives every reason,
// so that whoever adds force knows all it overrides.
func needsForce(abs string) error {
	return errors.Join(
		checkEmpty(abs, "its files would be served as the volume's; use an empty directory, or force to take it with its files"),
		notOnRootFS(abs))
}

// checkEmpty says why abs, if it holds anything, cannot be taken as it
// is: it is not empty, and why.
func checkEmpty(abs, why string) error {
	empty, err := isEmptyDir(abs)
	if err != nil || empty {
		return err
	}
	return fmt.Errorf("%s is not empty: %s", abs, why)
}

// notOnRootFS refuses a directory on the file system of "/", as GlusterFS
// does: a brick that fills up fills the disk the machine runs from, with
// its logs and the node's own state.
func notOnRootFS(abs string) error {
	same, err := sameFS(abs, "/")
	if err != nil || !same {
		return err
	}
	return fmt.Errorf("%s is on the root file system: a brick filling up would fill the disk the machine runs from (its logs, the node's state); use a directory on a disk or partition of its own, or force to use it anyway", abs)
}

// sameFS reports whether paths a and b are on the same file system.
func sameFS(a, b string) (bool, error) {
	var sa, sb unix.Stat_t
	if err := unix.Stat(a, &sa); err != nil {
		return false, fmt.Errorf("%s: %w", a, err)
	}
	if err := unix.Stat(b, &sb); err != nil {
		return false, fmt.Errorf("%s: %w", b, err)
	}
	return sa.Dev == sb.Dev, nil
}

// notSystem refuses the machine's own directories and forbidden ones.
func notSystem(abs string, forbidden []string) error {
	for _, d := range systemDirs {
		if abs == d {
			return fmt.Errorf("%s is a system directory and cannot be a brick (even with force): use a directory below it made for the brick", abs)
		}
	}
	for _, d := range forbidden {
		if d, err := filepath.EvalSymlinks(d); err == nil && (abs == d || strings.HasPrefix(abs, d+"/")) {
			return fmt.Errorf("%s is in the node's data directory %s and cannot be a brick (even with force)", abs, d)
		}
	}
	return nil
}

// isEmptyDir reports whether dir holds nothing.
func isEmptyDir(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return false, err
}
