package layer

import "strings"

// XattrRenamed names the record of a rename done by fewer replicas than
// it needed (the client was answered an error), which replicate leaves on
// the renamed inode on the replicas that did it: its old and new paths.
// Heal, taking the rename as done in one directory and as undone in the
// other, keeps one of those two names rather than neither
// (docs/REPLICATION.md, "Simulation"). Bricks keep it as an internal
// xattr, set and read by this name alone, never listed.
const XattrRenamed = "trusted.mortar.renamed"

// RenameRecord is the value of XattrRenamed.
type RenameRecord struct {
	From, To string
}

// Encode returns the record as stored.
func (r RenameRecord) Encode() []byte { return []byte(r.From + "\x00" + r.To) }

// Names reports whether path is one of the record's two names.
func (r RenameRecord) Names(path string) bool { return path == r.From || path == r.To }

// ParseRenameRecord reads a stored record.
func ParseRenameRecord(b []byte) (RenameRecord, bool) {
	from, to, ok := strings.Cut(string(b), "\x00")
	if !ok || !strings.HasPrefix(from, "/") || !strings.HasPrefix(to, "/") {
		return RenameRecord{}, false
	}
	return RenameRecord{From: from, To: to}, true
}
