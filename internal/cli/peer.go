package cli

import (
	"fmt"
	"io"
	"net"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mortarfs/mortar/mgmt/api"
)

func newPeerCommand() *cobra.Command {
	v := &volumeCmd{}
	cmd := &cobra.Command{
		Use:   "peer",
		Short: "Add nodes to the cluster, remove them, show them",
		Long: `Manage the nodes of the cluster through any of its nodes (--server, default
` + defaultServer() + `; the environment variable ` + serverEnv + ` sets the default).

A cluster is a set of "mortar server" nodes whose state (nodes, volumes,
bricks, options) is replicated with Raft: every node keeps a copy, and a
change is made once a majority of the nodes have it. One node is a cluster;
three tolerate the loss of one, five of two. Without a majority the volumes
keep serving but nothing can be changed ("no quorum").

Every node accepts every command and passes changes to the leader.`,
	}
	v.serverFlags(cmd)
	cmd.AddCommand(v.probeCommand(), v.detachCommand(), v.peerStatusCommand())
	return cmd
}

func (v *volumeCmd) probeCommand() *cobra.Command {
	var peerSecret string
	cmd := &cobra.Command{
		Use:   "probe HOST[:PORT]",
		Short: "Add the node running at HOST to the cluster",
		Long: `Add the mortar server running at HOST (port ` + fmt.Sprint(api.DefaultPort) + ` unless given) to this cluster.
That node must have no volumes and no peers of its own: it gives up its
one-node cluster and receives this cluster's state. Probing a node that is
already a member changes nothing.

Bricks on the new node are then named by the host written here, or by its
advertised address (peer status shows it).

Without TLS, a node answers other machines only when they prove they hold
its cluster secret (DATA/secret, made at its first start). A new node has a
secret of its own: copy that node's DATA/secret to this machine and give
it as --peer-secret-file. The probe proves with it that you control the
node, and hands the node this cluster's secret, which it keeps from then on
(DATA/secret is replaced). Neither secret crosses the network in clear:
the node's is sealed under the cluster's secret, so when --server is
another machine, give the cluster's secret too (--secret-file), or run the
probe on a node of the cluster. With TLS, node certificates do this
instead.`,
		Example: `  scp node2:/var/lib/mortar/secret /tmp/node2.secret
  mortar peer probe 10.0.0.2 --peer-secret-file /tmp/node2.secret
  mortar peer probe node3.example.com:7420 --server node1.example.com --secret-file cluster.secret --peer-secret-file node3.secret`,
		Args: usageArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := v.ctx(cmd)
			defer cancel()
			req := api.ProbeRequest{Host: args[0]}
			if peerSecret != "" {
				s, err := api.ReadSecretFile(peerSecret)
				if err != nil {
					return fmt.Errorf("peer probe: failed: %w", err)
				}
				req.Secret = s
			}
			p, err := v.client().ProbeNode(ctx, req)
			if err != nil {
				return fmt.Errorf("peer probe: failed: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "peer probe: success: node %s (%s) is in the cluster\n", p.ID, p.Addr)
			return nil
		},
	}
	cmd.Flags().StringVar(&peerSecret, "peer-secret-file", "", "the probed node's own cluster secret (a copy of its DATA/secret); needed without TLS for a node on another machine")
	return cmd
}

func (v *volumeCmd) detachCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "detach HOST",
		Short: "Remove a node that serves no brick from the cluster",
		Long: `Remove the node HOST from the cluster. A node that serves bricks is refused:
remove or replace its bricks first. The detached node becomes a cluster of
its own (with no volumes), which another cluster may probe.`,
		Args: usageArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := v.ctx(cmd)
			defer cancel()
			if err := v.client().Detach(ctx, args[0]); err != nil {
				return fmt.Errorf("peer detach: failed: %w", err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "peer detach: success")
			return nil
		},
	}
}

func (v *volumeCmd) peerStatusCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [--json]",
		Short: "Show the other nodes of the cluster and whether they answer",
		Long: `Show the other nodes of the cluster as GlusterFS does ("Number of Peers",
then each node's host, id and state), plus which node leads the cluster
("mortar pool list" lists every node, this one included).`,
		Args: usageArgs(0, 0),
		RunE: v.showPeers("peer status", &asJSON, printPeers),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the API's JSON")
	return cmd
}

// printPeers prints the nodes other than the answering one.
func printPeers(w io.Writer, peers []api.PeerInfo) {
	others := 0
	for _, p := range peers {
		if !p.Self {
			others++
		}
	}
	fmt.Fprintf(w, "Number of Peers: %d\n", others)
	for _, p := range peers {
		if p.Self {
			continue
		}
		fmt.Fprintf(w, "\nHostname: %s\nUuid: %s\nState: Peer in Cluster (%s)%s\n", hostOf(p.Addr), p.ID, connected(p), leaderMark(p))
		if p.Error != "" {
			fmt.Fprintf(w, "Error: %s\n", p.Error)
		}
	}
}

func newPoolCommand() *cobra.Command {
	v := &volumeCmd{}
	cmd := &cobra.Command{
		Use:   "pool",
		Short: "List every node of the cluster",
	}
	v.serverFlags(cmd)
	var asJSON bool
	list := &cobra.Command{
		Use:   "list [--json]",
		Short: "List every node of the cluster, this one included, and which leads",
		Args:  usageArgs(0, 0),
		RunE:  v.showPeers("pool list", &asJSON, printPool),
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print the API's JSON")
	cmd.AddCommand(list)
	return cmd
}

func connected(p api.PeerInfo) string {
	if p.Connected {
		return "Connected"
	}
	return "Disconnected"
}

func leaderMark(p api.PeerInfo) string {
	if p.Leader {
		return " (leader)"
	}
	return ""
}

// hostOf returns the host of host:port for display (the port when it is
// not the default too).
func hostOf(addr string) string {
	h, port := mgmtSplit(addr)
	if port == fmt.Sprint(api.DefaultPort) {
		return h
	}
	return addr
}

// mgmtSplit splits host:port ("" port if none).
func mgmtSplit(addr string) (string, string) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, ""
	}
	return h, p
}

// showPeers runs a command that lists the peers with print (or as JSON).
func (v *volumeCmd) showPeers(op string, asJSON *bool, print func(io.Writer, []api.PeerInfo)) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		ctx, cancel := v.ctx(cmd)
		defer cancel()
		peers, err := v.client().Peers(ctx)
		if err != nil {
			return fmt.Errorf("%s: failed: %w", op, err)
		}
		if *asJSON {
			return printJSON(cmd.OutOrStdout(), peers)
		}
		print(cmd.OutOrStdout(), peers)
		return nil
	}
}

// printPool prints every node, this one included, and which leads.
func printPool(w io.Writer, peers []api.PeerInfo) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "UUID\tHostname\tState\tRaft")
	for _, p := range peers {
		host := hostOf(p.Addr)
		if p.Self {
			host = "localhost"
		}
		role := "follower"
		if p.Leader {
			role = "leader"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.ID, host, connected(p), role)
	}
	tw.Flush()
}
