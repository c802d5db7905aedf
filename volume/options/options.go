// Package options is the one table of volume options: each key, its
// default, what it means (the help `volume set` and `volume get` print)
// and how a value is checked. mgmt checks `volume set` with it; volume
// builds a client's graph from a spec, taking the table's default for
// what the spec leaves unset (volume.Spec.Value). The heal daemon and the
// bricks read their options through the same keys.
package options

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/mortarfs/mortar/brick/posix"
	"github.com/mortarfs/mortar/layer/mdcache"
	"github.com/mortarfs/mortar/layer/nlcache"
	"github.com/mortarfs/mortar/layer/quickread"
	"github.com/mortarfs/mortar/layer/writebehind"
)

// Option is a volume option that `volume set` accepts.
type Option struct {
	Key         string
	Default     string
	Description string
	// check returns a problem with value, or "".
	check func(value string) string
}

// The keys. A spec carries only the options that were set; readers take
// the table's default for the others (Default; volume.Spec.Value).
const (
	OptAttrTimeout     = "performance.attr-timeout"
	OptEntryTimeout    = "performance.entry-timeout"
	OptNegativeTimeout = "performance.negative-timeout"
	OptPingTimeout     = "network.ping-timeout"
	// OptQuorumType: "auto" (a majority of each replica set must be up to
	// write; with an even count, half including the set's first brick),
	// "fixed" (OptQuorumCount bricks), "none".
	OptQuorumType = "cluster.quorum-type"
	// OptQuorumCount is the number of bricks of a set that must be up to
	// write when OptQuorumType is "fixed".
	OptQuorumCount = "cluster.quorum-count"
	// OptFavoriteChildPolicy resolves a split-brain automatically:
	// "none", "mtime" (the newest copy), "size" (the biggest), "majority"
	// (the copy most bricks agree on).
	OptFavoriteChildPolicy = "cluster.favorite-child-policy"
	// OptHealInterval is the number of seconds between scans of the heal
	// index.
	OptHealInterval = "cluster.heal-interval"
	// OptSelfHealDaemon "off" stops the heal daemon's own scans (every
	// heal-interval, after a brick's return); heal NAME and heal NAME full
	// still heal on demand.
	OptSelfHealDaemon = "cluster.self-heal-daemon"
	// OptDisperseQuiet is how many seconds a file of a dispersed volume
	// left dirty (its client may have died while writing) must go
	// unchanged before the healer checks its stripes.
	OptDisperseQuiet = "disperse.heal-quiet"
	// OptEncryption ("on"/"off") makes clients encrypt file contents with
	// the volume key before they leave the client (layer/crypt). It can
	// change only before the volume's first start.
	OptEncryption = "encryption"
	// OptAuthAllow and OptAuthReject are comma-separated lists of client
	// certificate names (with * globs) and addresses or CIDRs that may, or
	// may not, use the volume's bricks (TLS clusters; reject wins; node
	// certificates are always admitted).
	OptAuthAllow  = "auth.allow"
	OptAuthReject = "auth.reject"
	// OptStorageReserve is the space each brick keeps free for what
	// records the volume's state (marks, heal and gfid index entries): a
	// percentage of its file system or a size (posix.ParseReserve). Below
	// it a brick refuses new data with ENOSPC. Running bricks apply a
	// change (the node writes it where they read it, and rechecks them).
	OptStorageReserve = "storage.reserve"
)

// The volume options of the quick-read layer (layer/quickread), with
// GlusterFS's names where it has them (it has no volume option for the
// size: its translator's max-file-size).
const (
	// OptQuickRead "on" (the default) or "off" stacks the layer.
	OptQuickRead = "performance.quick-read"
	// OptQuickReadMaxFileSize is the size in bytes of the largest file
	// whose content lookups bring.
	OptQuickReadMaxFileSize = "performance.quick-read-max-file-size"
	// OptQuickReadCacheTimeout is how many seconds after its lookup the
	// content may serve an open (GlusterFS's performance.qr-cache-timeout
	// before it was renamed).
	OptQuickReadCacheTimeout = "performance.quick-read-cache-timeout"
)

// The volume options of the negative-lookup cache (layer/nlcache), with
// GlusterFS's names.
const (
	// OptNlCache "on" (the default) or "off" stacks the layer.
	OptNlCache = "performance.nl-cache"
	// OptNlCacheTimeout is how many seconds what a client learnt of a
	// directory's names is trusted.
	OptNlCacheTimeout = "performance.nl-cache-timeout"
)

// The volume options of write-behind (layer/writebehind), with GlusterFS's
// names.
const (
	// OptWriteBehind "on" (the default) or "off" stacks the layer.
	OptWriteBehind = "performance.write-behind"
	// OptWriteBehindWindowSize is the bytes of one file's window.
	OptWriteBehindWindowSize = "performance.write-behind-window-size"
	// OptWriteBehindMaxAge is how many seconds a window waits at most
	// before it is sent by itself.
	OptWriteBehindMaxAge = "performance.write-behind-max-age"
	// OptCreateBehind "on" (the default) has clients lease the names of
	// the directories they make, and answer a create in such a directory
	// at once, making the file with its first bytes and attributes when
	// write-behind sends them (layer/writebehind, create.go). mortar's
	// own: GlusterFS has no such thing.
	OptCreateBehind = "performance.create-behind"
	// OptUnlinkBehind "on" (the default) has clients answer the removal
	// of a name they made in a directory whose names they lease at once,
	// and send it in the background (layer/writebehind, removals.go);
	// with create-behind off there are no leases, and it does nothing.
	// mortar's own.
	OptUnlinkBehind = "performance.unlink-behind"
	// OptKeepUndo "on" (the default) has the overwrites of a dispersed
	// volume whose writes can tear a stripe (K - M >= 2, as 4 + 2) ask
	// the bricks to keep what they replace, from which heal puts back
	// whole a stripe a dying client left on too few bricks
	// (layer/disperse, undo.go). mortar's own.
	OptKeepUndo = "disperse.keep-undo"
)

// The volume options of the directory attribute cache (layer/mdcache),
// with GlusterFS's names (stat-prefetch is its switch of md-cache).
const (
	// OptStatPrefetch "on" (the default) or "off" stacks the layer.
	OptStatPrefetch = "performance.stat-prefetch"
	// OptMdCacheTimeout is how many seconds a directory's attributes
	// are kept.
	OptMdCacheTimeout = "performance.md-cache-timeout"
)

// OptReaddirAhead "on" (the default) or "off" stacks the layer that
// lists the directories of a tree being walked before they are asked for
// (layer/readdirahead, GlusterFS's readdir-ahead); a listing it read ahead
// serves for at most OptMdCacheTimeout.
const OptReaddirAhead = "performance.readdir-ahead"

// OptCacheInvalidation "on" has the bricks tell every client what other
// clients change, for its caches to forget at once rather than at their
// timeouts (GlusterFS's features.cache-invalidation, which also
// switches its performance.cache-invalidation).
const OptCacheInvalidation = "features.cache-invalidation"

// OptLockLeases "on" (the default) lets clients hold leases of the POSIX
// locks of files they alone lock, taking and releasing them without a
// round trip (layer/locks, lease.go); "off", or OptClientCache "off",
// sends every lock to the bricks.
const OptLockLeases = "features.lock-leases"

// OptClientCache "off" turns every client cache off at once, for honest
// measurements (as seed 001 measured GlusterFS): no quick-read, no
// write-behind, no negative-lookup cache, and kernel cache timeouts of 0
// unless set.
const OptClientCache = "performance.client-cache"

var table = []Option{
	{OptAttrTimeout, "1", "seconds the kernel may cache file attributes", seconds(0)},
	{OptEntryTimeout, "1", "seconds the kernel may cache name lookups", seconds(0)},
	{OptNegativeTimeout, "0", "seconds the kernel may cache failed lookups", seconds(0)},
	{OptPingTimeout, "5", "seconds without an answer before a brick counts as down", seconds(1)},
	{OptQuorumType, "auto", "auto, fixed or none: how many bricks of a replica set must be up to write", oneOf("auto", "fixed", "none")},
	{OptQuorumCount, "", "bricks of a replica set that must be up to write, with quorum-type fixed", atLeast(1)},
	{OptFavoriteChildPolicy, "none", "none, mtime, size or majority: which copy wins a split-brain", oneOf("none", "mtime", "size", "majority")},
	{OptHealInterval, "2", "seconds between scans of the heal index", seconds(0.1)},
	{OptSelfHealDaemon, "on", "on or off: the heal daemon scans the heal index by itself (off: only on \"volume heal NAME\")", oneOf("on", "off")},
	{OptDisperseQuiet, "30", "seconds a dirty file of a dispersed volume must go unchanged before heal checks its stripes", seconds(0)},
	{OptKeepUndo, "on", "on or off: where a client dying mid-write can leave a stripe on too few bricks (K - M >= 2, as 4 + 2), the bricks keep in memory what overwrites replace, from which heal puts the stripe back whole (off: overwrites about 20 % faster, and such a stripe stays old or new per 64 KiB chunk)", oneOf("on", "off")},
	{OptEncryption, "off", "on or off: clients encrypt file contents with the volume key (set before the first start)", oneOf("on", "off")},
	{OptAuthAllow, "", "certificate names (globs) and addresses/CIDRs allowed to use the volume (empty: all)", authList},
	{OptAuthReject, "", "certificate names (globs) and addresses/CIDRs refused (wins over auth.allow)", authList},
	{OptQuickRead, "on", "on or off: a small file's content comes with its lookup, so that reading it costs one round trip (not on encrypted volumes; on dispersed ones up to 64 KiB)", oneOf("on", "off")},
	{OptQuickReadMaxFileSize, strconv.Itoa(quickread.DefaultMaxFileSize), "bytes: the largest file quick-read serves (at most 1048576)", between(1, quickread.FileSizeLimit)},
	{OptQuickReadCacheTimeout, strconv.FormatFloat(quickread.DefaultTimeout.Seconds(), 'f', -1, 64), "seconds a small file's content from a lookup may serve an open (a change through another client may be missed for that long)", seconds(0.01)},
	{OptClientCache, "on", "on or off: off turns every client cache off at once (quick-read, write-behind, nl-cache, readdir-ahead, and the kernel's unless their timeouts are set), for measurements", oneOf("on", "off")},
	{OptWriteBehind, "on", "on or off: small sequential writes are acknowledged at once and sent to the bricks aggregated (errors at close or fsync; O_DIRECT, O_SYNC and fsync exact)", oneOf("on", "off")},
	{OptWriteBehindWindowSize, strconv.Itoa(writebehind.DefaultWindowSize), "bytes a file may keep acknowledged but unsent (at most 16777216)", between(4096, 16<<20)},
	{OptWriteBehindMaxAge, strconv.FormatFloat(writebehind.DefaultMaxAge.Seconds(), 'f', -1, 64), "seconds acknowledged bytes may wait before they are sent by themselves", seconds(0.01)},
	{OptCreateBehind, "on", "on or off: a client leases the names of the directories it makes, and a file it creates in one is made with its first bytes and attributes in one round trip when write-behind sends them (another client's access to the directory recalls the lease first; not on encrypted volumes)", oneOf("on", "off")},
	{OptUnlinkBehind, "on", "on or off: with create-behind, a client answers the removal of a name it made in a directory it leases at once and sends it in the background, several at a time (every other operation of the mount waits for them first; a removal that fails is reported by the next fsync of a directory)", oneOf("on", "off")},
	{OptNlCache, "on", "on or off: a lookup of a name that a directory the client made or listed lacks fails at once, without a round trip", oneOf("on", "off")},
	{OptStatPrefetch, "on", "on or off: clients keep the attributes of directories (the kernel asks for them again after every name made in one)", oneOf("on", "off")},
	{OptMdCacheTimeout, strconv.FormatFloat(mdcache.DefaultTimeout.Seconds(), 'f', -1, 64), "seconds a client keeps a directory's attributes, and may serve a listing read ahead (a change through another client may be missed for that long)", seconds(0.01)},
	{OptReaddirAhead, "on", "on or off: while a tree is walked (find, ls -R), clients list its directories in the background before they are asked for; a listing so read serves once, within performance.md-cache-timeout", oneOf("on", "off")},
	{OptCacheInvalidation, "off", "on or off: bricks tell every mount what other clients change, so that its caches (quick-read, nl-cache, the kernel's) forget it at once rather than at their timeouts", oneOf("on", "off")},
	{OptLockLeases, "on", "on or off: a client that alone locks a file (fcntl) takes and releases its locks without a round trip until another client asks for one (off, or performance.client-cache off: every lock goes to the bricks)", oneOf("on", "off")},
	{OptStorageReserve, "1", "space each brick keeps free, refusing new data below it: a percentage of its file system (default 1, at most 1 GiB unless set) or a size such as 10GB; at least 1 MiB (room for heal marks); running bricks apply a change at once", reserveValue},
	{OptNlCacheTimeout, strconv.FormatFloat(nlcache.DefaultTimeout.Seconds(), 'f', -1, 64), "seconds a client trusts what it knows of a directory's names (a name made through another client may be missed for that long)", seconds(0.01)},
}

// authList accepts a comma-separated list of non-empty entries without
// spaces (certificate names, globs, addresses, CIDRs).
func authList(v string) string {
	if v == "" {
		return ""
	}
	for _, e := range strings.Split(v, ",") {
		if e == "" || strings.ContainsAny(e, " \t\n") {
			return "must be a comma-separated list of certificate names, addresses or CIDRs"
		}
	}
	return ""
}

// Known returns the options that `volume set` accepts, sorted by key.
func Known() []Option {
	out := append([]Option(nil), table...)
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// seconds accepts a number of seconds (fractions allowed) of at least min.
func seconds(min float64) func(string) string {
	return func(v string) string {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f > 86400 {
			return "must be a number of seconds (at most 86400)"
		}
		if f < min {
			return "must be at least " + strconv.FormatFloat(min, 'f', -1, 64) + " seconds"
		}
		return ""
	}
}

// reserveValue checks a storage.reserve value.
func reserveValue(v string) string {
	if _, err := posix.ParseReserve(v); err != nil {
		return err.Error()
	}
	return ""
}

// oneOf accepts one of values.
func oneOf(values ...string) func(string) string {
	return func(v string) string {
		if slices.Contains(values, v) {
			return ""
		}
		return "must be one of " + strings.Join(values, ", ")
	}
}

// atLeast accepts an integer of at least min.
func atLeast(min int) func(string) string {
	return func(v string) string {
		n, err := strconv.Atoi(v)
		if err != nil || n < min {
			return "must be an integer of at least " + strconv.Itoa(min)
		}
		return ""
	}
}

// between accepts an integer from min to max.
func between(min, max int) func(string) string {
	return func(v string) string {
		n, err := strconv.Atoi(v)
		if err != nil || n < min || n > max {
			return "must be an integer from " + strconv.Itoa(min) + " to " + strconv.Itoa(max)
		}
		return ""
	}
}

// Default is option key's default ("" if none or unknown).
func Default(key string) string {
	for _, o := range table {
		if o.Key == key {
			return o.Default
		}
	}
	return ""
}

// IsKnown reports whether `volume set` knows key.
func IsKnown(key string) bool {
	return slices.ContainsFunc(table, func(o Option) bool { return o.Key == key })
}

// Check validates a `volume set` key and value: an unknown key, or a
// value its check refuses, is an error saying why.
func Check(key, value string) error {
	for _, o := range table {
		if o.Key != key {
			continue
		}
		if msg := o.check(value); msg != "" {
			return fmt.Errorf("option %s: %q %s", key, value, msg)
		}
		return nil
	}
	keys := make([]string, 0, len(table))
	for _, o := range Known() {
		keys = append(keys, o.Key)
	}
	return fmt.Errorf("unknown option %q; known options: %s", key, strings.Join(keys, ", "))
}
