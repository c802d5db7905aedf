package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/mortarfs/mortar/layer/crypt"
)

func newKeyCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "key [--out FILE]",
		Short: "Make a new volume key for an encrypted volume",
		Long: `Print a new random volume key (32 bytes, as 64 hex digits), or write it to
FILE (mode 0600, never over an existing file).

An encrypted volume ("mortar volume set NAME encryption on" before its first
start) is read and written only by clients that have its key: give it to a
mount with -o key-file=FILE, or in the environment variable ` + crypt.EnvKey + `.
Servers never need it. Keep a copy: without the key the files cannot be read.`,
		Example: `  mortar key --out /etc/mortar/secret.key
  mortar mount -o key-file=/etc/mortar/secret.key server1:/secret /mnt/secret`,
		Args: usageArgs(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			key := crypt.EncodeKey(crypt.NewKey()) + "\n"
			if out == "" {
				fmt.Fprint(cmd.OutOrStdout(), key)
				return nil
			}
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return fmt.Errorf("mortar key: %w", err)
			}
			if _, err := f.WriteString(key); err != nil {
				f.Close()
				return fmt.Errorf("mortar key: %w", err)
			}
			if err := f.Close(); err != nil {
				return fmt.Errorf("mortar key: %w", err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "mortar key: new volume key written to %s (keep a copy: without it the files cannot be read)\n", out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write the key to this new file (mode 0600) instead of printing it")
	return cmd
}
