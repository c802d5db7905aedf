package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

func newInstallCommand() *cobra.Command {
	var dir string
	var force bool
	cmd := &cobra.Command{
		Use:   "install [--dir /sbin]",
		Short: "Make mount(8) and /etc/fstab able to mount mortar volumes (symlink mount.mortar)",
		Long: `Create the symbolic link DIR/mount.mortar pointing to this mortar binary, so that
mount(8) can mount file systems of type "mortar":

  mount -t mortar server1:/gv0 /mnt/gv0

and /etc/fstab lines like this one mount at boot, once the network is up:

  server1:/gv0  /mnt/gv0  mortar  defaults,_netdev  0 0

An existing mount.mortar symlink is replaced; any other file there is kept
unless --force is given.`,
		Args: usageArgs(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			link, target, err := installHelper(dir, force)
			if err != nil {
				return fmt.Errorf("mortar install: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s -> %s\n", link, target)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "/sbin", "directory for the mount.mortar link")
	cmd.Flags().BoolVar(&force, "force", false, "replace a mount.mortar that is not a symlink")
	return cmd
}

// installHelper links dir/mount.mortar to the running binary.
func installHelper(dir string, force bool) (link, target string, err error) {
	exe, err := os.Executable()
	if err != nil {
		return "", "", fmt.Errorf("find own executable: %w", err)
	}
	if target, err = filepath.EvalSymlinks(exe); err != nil {
		return "", "", fmt.Errorf("find own executable: %w", err)
	}
	link = filepath.Join(dir, helperName)
	st, err := os.Lstat(link)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return "", "", err
	case st.Mode()&fs.ModeSymlink == 0 && !force:
		return "", "", fmt.Errorf("%s exists and is not a symlink; use --force to replace it", link)
	}
	tmp := link + ".mortar-new"
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return "", "", err
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return "", "", err
	}
	return link, target, nil
}
