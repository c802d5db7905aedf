package cli

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/tlsconf"
)

// tlsExample is how a three-node cluster is secured, shown by every
// `mortar tls` command's help.
const tlsExample = `  # On one machine (keep its ca.key safe: it makes certificates):
  mortar tls ca init --dir /etc/mortar/tls --org example
  mortar tls issue --dir /etc/mortar/tls --node node1 --host node1.example.com,10.0.0.1
  mortar tls issue --dir /etc/mortar/tls --node node2 --host node2.example.com,10.0.0.2
  mortar tls issue --dir /etc/mortar/tls --node node3 --host node3.example.com,10.0.0.3
  mortar tls issue --dir /etc/mortar/tls --client web1

  # Copy ca.pem and the machine's own NAME.pem and NAME.key (never ca.key)
  # to each machine, into /etc/mortar/tls:
  scp /etc/mortar/tls/{ca.pem,node2.pem,node2.key} node2:/etc/mortar/tls/
  scp /etc/mortar/tls/{ca.pem,web1.pem,web1.key} web1:/etc/mortar/tls/

  # Then on each server, and on each client:
  mortar server --tls-dir /etc/mortar/tls --tls-name node2 ...
  mortar mount --tls-dir /etc/mortar/tls --tls-name web1 node1:/vol /mnt/vol
  # (or set ` + tlsconf.EnvDir + ` and ` + tlsconf.EnvName + ` instead of the flags)

  # Let only web1 and the 10.0.1.0/24 network mount vol:
  mortar volume set vol auth.allow web1,10.0.1.0/24`

func newTLSCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tls",
		Short: "Make the certificates that secure a cluster with TLS",
		Long: `Make a certificate authority (CA) for a cluster, and certificates signed by it
for its nodes and clients.

With TLS on, every connection (client to brick, client to management, node to
node) is TLS 1.3 and both ends show a certificate of the cluster's CA: a client
without one is refused at once, and says so, as does the server's log. A
node certificate (one per "mortar server") serves and dials, and is trusted as
a node of the cluster: it may change the cluster and reach every brick. A
client certificate (a mount, a backup job, an admin's tools) can only dial,
and reaches a volume only if the volume's auth.allow and auth.reject let its
name and address in.

A TLS directory holds ca.pem (on the machine that makes certificates, also
ca.key) and NAME.pem + NAME.key for each certificate kept there. A machine
needs ca.pem and its own certificate and key. TLS is on for a cluster when its
servers run with --tls-dir and --tls-name; it is all or nothing.

Certificates made by other tools work if they follow the same layout: the
kind ("node" or "client") in the subject's OU, the name in its CN.`,
		Example: tlsExample,
	}
	ca := &cobra.Command{
		Use:     "ca",
		Short:   "Manage the cluster's certificate authority",
		Example: tlsExample,
	}
	ca.AddCommand(newTLSCAInitCommand())
	cmd.AddCommand(ca, newTLSIssueCommand(), newTLSShowCommand(), newTLSRevokeCommand())
	return cmd
}

// tlsDirFlag adds --dir, defaulting to $MORTAR_TLS_DIR.
func tlsDirFlag(cmd *cobra.Command, dir *string) {
	cmd.Flags().StringVar(dir, "dir", os.Getenv(tlsconf.EnvDir), "TLS directory (env "+tlsconf.EnvDir+")")
}

func needDir(dir string) error {
	if dir == "" {
		return fmt.Errorf("--dir is required (the TLS directory; or set %s)", tlsconf.EnvDir)
	}
	return nil
}

func newTLSCAInitCommand() *cobra.Command {
	var dir, org string
	cmd := &cobra.Command{
		Use:   "init --dir DIR [--org NAME]",
		Short: "Create the cluster's certificate authority in DIR",
		Long: `Create a certificate authority in DIR (made if needed): an ECDSA P-256 key,
ca.key (mode 0600), and a self-signed certificate valid ten years, ca.pem.

Run it once per cluster, on the machine that will make the certificates
("mortar tls issue"). Keep ca.key there only: whoever has it can make
certificates the cluster trusts. ca.pem goes to every machine. An existing CA
is never replaced.`,
		Example: tlsExample,
		Args:    usageArgs(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := needDir(dir); err != nil {
				return err
			}
			if err := tlsconf.InitCA(dir, org); err != nil {
				return fmt.Errorf("tls ca init: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "tls ca init: wrote %s and %s (keep ca.key on this machine only)\n",
				tlsconf.CertPath(dir, "ca"), tlsconf.KeyPath(dir, "ca"))
			return nil
		},
	}
	tlsDirFlag(cmd, &dir)
	cmd.Flags().StringVar(&org, "org", "mortar", "organisation named in the CA's subject (the cluster's name)")
	return cmd
}

func newTLSIssueCommand() *cobra.Command {
	var dir, node, client string
	var hosts []string
	var days int
	cmd := &cobra.Command{
		Use:   "issue --dir DIR (--node NAME --host H[,H...] | --client NAME) [--days N]",
		Short: "Make a node or client certificate signed by the CA in DIR",
		Long: `Make NAME.pem and NAME.key (mode 0600) in DIR, a certificate signed by DIR's
CA (ca.pem and ca.key) with the subject CN=NAME, OU=node or OU=client.

--node NAME makes the certificate of a "mortar server": it serves and dials,
and --host lists the DNS names and IP addresses the node is reached by (put
in the certificate for other tools; mortar itself trusts any node certificate
of its CA, whatever address it dialled).

--client NAME makes a client's certificate: a mount or a tool. NAME is what
auth.allow and auth.reject name.

Names are letters, digits, '.', '-' and '_'. An existing NAME.key is never
replaced: to renew, remove NAME.pem and NAME.key and issue again.`,
		Example: tlsExample,
		Args:    usageArgs(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := needDir(dir); err != nil {
				return err
			}
			name, kind := node, tlsconf.KindNode
			switch {
			case node != "" && client != "":
				return fmt.Errorf("tls issue: give --node or --client, not both")
			case client != "":
				name, kind = client, tlsconf.KindClient
				if len(hosts) > 0 {
					return fmt.Errorf("tls issue: --host is for node certificates")
				}
			case node == "":
				return fmt.Errorf("tls issue: give --node NAME --host H[,H...] or --client NAME")
			case len(hosts) == 0:
				return fmt.Errorf("tls issue: --host is required with --node: the node's DNS names and IP addresses (comma list)")
			}
			if err := tlsconf.Issue(dir, name, kind, hosts, days); err != nil {
				return fmt.Errorf("tls issue: %w", err)
			}
			c, err := tlsconf.ReadCert(dir, name)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "tls issue: wrote %s and %s: %s certificate %q, valid until %s\n",
				tlsconf.CertPath(dir, name), tlsconf.KeyPath(dir, name), kind, name, c.NotAfter.Format(time.DateOnly))
			fmt.Fprintf(out, "Copy ca.pem, %s.pem and %s.key to the %s's TLS directory and run it with --tls-dir DIR --tls-name %s.\n",
				name, name, kind, name)
			return nil
		},
	}
	tlsDirFlag(cmd, &dir)
	f := cmd.Flags()
	f.StringVar(&node, "node", "", "make the certificate of node NAME")
	f.StringVar(&client, "client", "", "make the certificate of client NAME")
	f.StringSliceVar(&hosts, "host", nil, "DNS names and IP addresses of the node (comma list, or repeat)")
	f.IntVar(&days, "days", tlsconf.DefaultDays, "days the certificate is valid (at most until the CA expires)")
	return cmd
}

func newTLSRevokeCommand() *cobra.Command {
	var dir, server, name string
	cmd := &cobra.Command{
		Use:   "revoke --dir DIR NAME [--server HOST --tls-name NODE]",
		Short: "Stop accepting certificate NAME of DIR",
		Long: `Add the serial number of DIR/NAME.pem to DIR/revoked, the revocation list
that every server, brick, mount and CLI using DIR refuses at the TLS handshake:
a revoked client cannot connect, a revoked node is not trusted by clients.
They read the list again whenever it changes: no restart.

With --server, the cluster is told too (presenting node certificate NODE of
DIR): it keeps the serial in its replicated state, and every node adds it to
its own TLS directory's list at once (a node that is down, when it is back),
so its server and bricks refuse the certificate. Mounts and CLIs on machines
that are not nodes read their own DIR/revoked: copy it there. The CA itself
cannot be revoked: make a new one.`,
		Example: `  mortar tls revoke --dir /etc/mortar/tls laptop --server node1 --tls-name node1
  mortar tls revoke --dir /etc/mortar/tls laptop    # this machine's list only`,
		Args: usageArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := needDir(dir); err != nil {
				return err
			}
			if server != "" && name == "" {
				return fmt.Errorf("tls revoke: --server needs --tls-name, a node certificate of %s to present", dir)
			}
			serial, err := tlsconf.Revoke(dir, args[0])
			if err != nil {
				return fmt.Errorf("tls revoke: %w", err)
			}
			out := cmd.OutOrStdout()
			if server == "" {
				fmt.Fprintf(out, "revoked %s (serial %s) in %s; copy it to every machine's TLS directory, or run again with --server\n",
					args[0], serial, tlsconf.RevokedPath(dir))
				return nil
			}
			if err := revokeInCluster(cmd.Context(), dir, name, server, args[0], serial); err != nil {
				return fmt.Errorf("tls revoke: revoked in %s, but not in the cluster: %w", tlsconf.RevokedPath(dir), err)
			}
			fmt.Fprintf(out, "revoked %s (serial %s) in %s and in the cluster (every node's list)\n", args[0], serial, tlsconf.RevokedPath(dir))
			return nil
		},
	}
	tlsDirFlag(cmd, &dir)
	f := cmd.Flags()
	f.StringVar(&server, "server", "", "management address of a node of the cluster to tell, host[:port]")
	f.StringVar(&name, "tls-name", "", "the node certificate of DIR to present to --server")
	return cmd
}

// revokeInCluster tells the cluster at server, as node certificate name
// of dir, to refuse the certificate of serial (which, name says).
func revokeInCluster(ctx context.Context, dir, name, server, which, serial string) error {
	id, err := tlsconf.Load(dir, name)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	note := fmt.Sprintf("%s, revoked %s", which, time.Now().UTC().Format(time.RFC3339))
	return api.NewTLSClient(server, id).Revoke(ctx, serial, note)
}

func newTLSShowCommand() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "show --dir DIR NAME",
		Short: "Describe certificate NAME of DIR (ca: the CA's)",
		Long: `Print the subject, kind, names and addresses (SANs) and validity of DIR/NAME.pem,
and whether it is signed by DIR's CA and fits NAME.key. "ca" shows the CA.`,
		Example: `  mortar tls show --dir /etc/mortar/tls node1
  mortar tls show --dir /etc/mortar/tls ca`,
		Args: usageArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := needDir(dir); err != nil {
				return err
			}
			c, err := tlsconf.ReadCert(dir, args[0])
			if err != nil {
				return fmt.Errorf("tls show: %w", err)
			}
			printCert(cmd.OutOrStdout(), c)
			if args[0] != "ca" {
				status := "ok: signed by the CA, valid now, fits " + args[0] + ".key"
				if _, err := tlsconf.Load(dir, args[0]); err != nil {
					status = "NOT USABLE: " + err.Error()
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Check:     %s\n", status)
			}
			return nil
		},
	}
	tlsDirFlag(cmd, &dir)
	return cmd
}

func printCert(w io.Writer, c *x509.Certificate) {
	kind := "client"
	switch {
	case c.IsCA:
		kind = "certificate authority"
	case len(c.Subject.OrganizationalUnit) > 0 && c.Subject.OrganizationalUnit[0] == string(tlsconf.KindNode):
		kind = "node"
	}
	var sans []string
	sans = append(sans, c.DNSNames...)
	for _, ip := range c.IPAddresses {
		sans = append(sans, ip.String())
	}
	if len(sans) == 0 {
		sans = []string{"-"}
	}
	left := time.Until(c.NotAfter).Round(time.Hour)
	expiry := fmt.Sprintf("%s (in %d days)", c.NotAfter.Format(time.RFC3339), int(left.Hours()/24))
	if left < 0 {
		expiry = c.NotAfter.Format(time.RFC3339) + " (EXPIRED)"
	}
	fmt.Fprintf(w, "Subject:   %s\n", c.Subject)
	fmt.Fprintf(w, "Kind:      %s\n", kind)
	fmt.Fprintf(w, "Issuer:    %s\n", c.Issuer)
	fmt.Fprintf(w, "SANs:      %s\n", strings.Join(sans, ", "))
	fmt.Fprintf(w, "Valid:     from %s\n", c.NotBefore.Format(time.RFC3339))
	fmt.Fprintf(w, "Expires:   %s\n", expiry)
	fmt.Fprintf(w, "Serial:    %x\n", c.SerialNumber)
}
