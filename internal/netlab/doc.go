// Package netlab makes a small network of "hosts" on one Linux machine, as
// network namespaces, for tests and benchmarks that need several machines:
// each host has its own address, its own shaped link, and may run a
// `mortar server` that can be stopped, killed and restarted; links can be
// cut, restored and slowed.
//
// # Topology
//
// A Lab is a star. One client namespace (Lab.Client) is joined to every
// host namespace (Lab.Hosts[i]) by its own veth pair:
//
//	host i  10.231.i.1/24  ──veth──  10.231.i.2/24  client
//
// The client namespace forwards between its links, and every host routes
// 10.231.0.0/16 through it, so hosts reach each other through the client
// (as machines behind one switch). With Config.RateMbit set, both ends of
// every link are shaped by a token bucket (tbf) to that rate, so each host
// has a link of its own of that rate, and traffic between two hosts
// crosses two of them. The addresses exist only inside the namespaces: no
// traffic of a lab reaches the machine's own network, and two labs at once
// (two tests, a test and a benchmark) use the same addresses without
// meeting.
//
// # Running things in a host
//
// Host.Command and Host.Exec run a program in a host's network namespace
// with `nsenter --net`, which (unlike `ip netns exec`) keeps the mount
// namespace: a FUSE mount made in the client namespace is visible to the
// test process at the same path. Host.Dial, Host.Listen and
// Host.HTTPClient make sockets inside a namespace from this process.
//
// Host.StartServer runs `mortar server --data DIR --listen ADDR:7420` in a
// host, its output appended to a log file, and returns once its API
// answers GET /v1/node. Host.Stop (SIGTERM), Host.Kill (SIGKILL to every
// process of the host: the server and its bricks, as a power cut would)
// and Host.Restart (same data directory, same address) act on it.
//
// # Faults
//
// CutLink drops every packet on a host's link, both ways, silently (as a
// pulled cable: the kernel's routes stay, connections time out rather than
// fail at once); RestoreLink puts the link back as configured. SlowLink
// changes a link's rate, and adds a delay where the kernel has netem
// (ErrNoNetem otherwise). The cut works without netem: each end gets an
// ingress filter redirecting every packet to a device that is down.
//
// # Clean-up
//
// Namespaces and the lab's work directory are named after the process
// (mlab<pid>-<seq>-...). Close stops the servers, kills whatever still runs
// in the namespaces, unmounts what is mounted under Lab.Dir, and deletes
// the namespaces and Lab.Dir; it is bounded in time and safe to call more
// than once. New first removes what labs of processes that no longer run
// left behind (a test killed by its timeout), the same way.
//
// Everything here needs root and iproute2 (ip, tc, nsenter); New returns an
// error wrapping ErrUnavailable when the machine cannot make namespaces, so
// a test can skip with the reason.
package netlab
