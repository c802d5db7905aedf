package layer

// Change is what a brick reports that another client changed, so that a
// client's caches forget what it no longer holds true (GlusterFS's
// upcall/cache-invalidation). Changes are reported by path, as the brick
// saw it: a notice may name a path the client never cached, and for a
// file renamed while open the old name.
type Change struct {
	// Path is what changed: with Entry, the name itself (created,
	// removed, renamed away or onto; its directory's listing and
	// attributes changed too); without, the attributes, content or
	// extended attributes of the inode at Path.
	Path  string
	Entry bool
	// All means anything may have changed: notices were lost (a
	// reconnect, or a client too slow to take them). Path is "/".
	All bool
}

// ChangedAll is the Change that means anything may have changed.
var ChangedAll = Change{Path: "/", All: true}

// Forgetter is a caching layer that forgets what a Change makes stale.
// Forget must not block on the network: it runs on the connection that
// brought the notice.
type Forgetter interface {
	Forget(Change)
}
