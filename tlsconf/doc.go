// Package tlsconf is mortar's TLS: the certificates of a cluster, the TLS
// configurations every connection uses (client ↔ brick, client ↔
// management, node ↔ node), and the per-volume access rules (auth.allow,
// auth.reject) that bricks apply to the identities it establishes.
//
// # Certificates
//
// A cluster has its own certificate authority. A TLS directory holds the
// CA's certificate, ca.pem (and, on the machine where certificates are
// made, its key ca.key), and NAME.pem + NAME.key for each identity kept
// there. An identity is a node (a `mortar server`; its certificate serves
// and dials) or a client (a mount or an admin tool; it only dials). The
// certificate's common name is the identity's name and its organisational
// unit is its kind:
//
//	InitCA(dir, "example")                               // once, on one machine
//	Issue(dir, "node1", KindNode, []string{"10.0.0.1", "node1.example.com"}, 365)
//	Issue(dir, "backup", KindClient, nil, 365)
//	id, err := Load(dir, "node1")                       // on node1, with ca.pem, node1.pem, node1.key
//
// Certificates made elsewhere work too if they follow the layout: the
// kind in OU (node or client; anything else counts as a client), the name
// in CN, ExtKeyUsage serverAuth+clientAuth for nodes and clientAuth for
// clients.
//
// # Connections
//
// Every connection is TLS 1.3 and both sides present a certificate of the
// cluster's CA: ServerConfig requires and verifies a client certificate;
// ClientConfig verifies the server's certificate against the CA and
// requires it to be a node certificate. The server's name is not compared
// with the address dialled: any node certificate of the cluster's CA is a
// node of the cluster, whatever address it is reached by (bricks move
// between ports and addresses, and every node is trusted alike).
//
// Dialer gives a dial function for protocol.Config.Dial and
// volume.BuildOptions.Dial; Listen (or WrapListener) a listener that
// handshakes each connection before Accept returns it and logs the ones it
// refuses. PeerIdentity names the other side of an established connection.
//
// # Access rules
//
// AuthRules are a volume's auth.allow and auth.reject: comma lists of
// certificate names (with * globs) and addresses (IPs, CIDRs, or IPv4
// globs such as 10.0.*.*). Reject wins; an empty allow list allows
// everyone; node certificates are always allowed. A brick process reads
// its rules from a file (WriteAuthFile, AuthFile) so that they can change
// while it runs.
package tlsconf
