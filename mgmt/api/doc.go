// Package api is the contract of mortar's management API and its typed
// client: what the CLI, a mount, the client library and one node asking
// another send over HTTP, and what they get back. The server is package
// mgmt (a node). The client library needs nothing of mgmt but this
// package, so it links neither Raft nor the node's store (the CLI, which
// also runs the node, still takes a few checks from mgmt).
//
//   - Client (client*.go): one method per endpoint, errors rebuilt with
//     their marker (errors.go), requests signed with the cluster secret
//     when there is no TLS (sign.go), a spec followed by long polls
//     (client_watch.go).
//   - The request and answer types (types.go, healinfo.go), with the
//     names of tasks, actions and the spec watch's bounds.
//   - Which host is this machine (hosts.go), for the client's refusal to
//     send a secret in clear to another machine and for the server's
//     checks of whom a signed request was meant for.
package api
