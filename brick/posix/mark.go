package posix

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/layer"
)

// Mark makes the directory root a brick of volume volumeID: it records the
// volume id on root, creates the hidden directory and gives root the root
// gfid. It refuses a root that is missing or not a directory, one that can
// never be a brick (fit; forbidden: the node's data directory), one that
// already belongs to another volume or lies inside another brick, and,
// unless force, a new one that is not empty or is on the root file
// system. The refusals force cannot lift come first. Marking again with
// the same id is a no-op.
func Mark(root, volumeID string, force bool, forbidden ...string) error {
	if volumeID == "" {
		return errors.New("mark brick: empty volume id")
	}
	abs, err := checkDir(root)
	if err != nil {
		return err
	}
	if err := fit(abs, forbidden...); err != nil {
		return err
	}
	cur, err := ReadMark(abs)
	if err != nil {
		return err
	}
	if cur != "" && cur != volumeID {
		return fmt.Errorf("%s is already part of volume %s", root, cur)
	}
	if err := checkAncestors(abs); err != nil {
		return err
	}
	if cur == "" && !force {
		if err := needsForce(abs); err != nil {
			return err
		}
	}
	if err := unix.Setxattr(abs, XattrVolumeID, []byte(volumeID), 0); err != nil {
		return fmt.Errorf("mark brick %s: %w", root, err)
	}
	hidden := filepath.Join(abs, HiddenDir)
	if err := os.Mkdir(hidden, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("mark brick %s: %w", root, err)
	}
	if st, err := os.Lstat(hidden); err != nil || !st.IsDir() {
		return fmt.Errorf("mark brick %s: %s exists and is not a directory", root, hidden)
	}
	// The root must carry the root gfid, whatever it had before.
	g := layer.RootGfid
	if err := unix.Setxattr(abs, XattrGfid, g[:], 0); err != nil {
		return fmt.Errorf("mark brick %s: %w", root, err)
	}
	return nil
}

// CheckNew says why root cannot become a new, empty brick (replace-brick),
// without writing anything: what Mark would refuse, any content or mark
// (even with force: heal fills a new brick from the others), and, unless
// force, a directory on the root file system.
func CheckNew(root string, force bool, forbidden ...string) error {
	abs, err := checkDir(root)
	if err != nil {
		return err
	}
	if err := fit(abs, forbidden...); err != nil {
		return err
	}
	if cur, err := ReadMark(abs); err != nil || cur != "" {
		return errors.Join(err, fmt.Errorf("%s is already part of volume %s", root, cur))
	}
	if err := checkAncestors(abs); err != nil {
		return err
	}
	if err := checkEmpty(abs, "a new brick must start empty (heal fills it from the other bricks of its set)"); err != nil {
		return err
	}
	if force {
		return nil
	}
	return notOnRootFS(abs)
}

// Unmark removes what Mark put on root, so that it can join another
// volume: the volume id and gfid of the root and the hidden directory
// (heal indexes, migration state of the old volume). The files stay.
func Unmark(root string) error {
	abs, err := checkDir(root)
	if err != nil {
		return err
	}
	for _, x := range []string{XattrVolumeID, XattrGfid} {
		if err := unix.Removexattr(abs, x); err != nil && err != unix.ENODATA {
			return fmt.Errorf("unmark brick %s: %w", root, err)
		}
	}
	if err := os.RemoveAll(filepath.Join(abs, HiddenDir)); err != nil {
		return fmt.Errorf("unmark brick %s: %w", root, err)
	}
	return nil
}

// ReadMark returns the volume id root is marked with, or "" if none.
func ReadMark(root string) (string, error) {
	v, err := getxattrString(root, XattrVolumeID, true)
	if err != nil {
		return "", fmt.Errorf("read volume id of %s: %w", root, err)
	}
	return v, nil
}

// checkDir returns root as an absolute path with symlinks resolved, if it
// is an existing directory.
func checkDir(root string) (string, error) {
	st, err := os.Stat(root)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("brick %s does not exist", root)
	}
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", fmt.Errorf("brick %s is not a directory", root)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// checkAncestors refuses a directory inside a brick.
func checkAncestors(abs string) error {
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		v, err := getxattrString(dir, XattrVolumeID, true)
		if err == nil && v != "" {
			return fmt.Errorf("%s is inside brick %s, which is already part of volume %s", abs, dir, v)
		}
		if dir == "/" {
			return nil
		}
	}
}
