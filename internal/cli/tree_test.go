package cli

import (
	"testing"

	"github.com/spf13/cobra"
)

// TestEveryCommandChecksArgs: every command says which arguments it takes,
// so a wrong count fails instead of being ignored.
func TestEveryCommandChecksArgs(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() && c.Args == nil {
			t.Errorf("%s has no Args check", c.CommandPath())
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(NewRootCommand())
}
