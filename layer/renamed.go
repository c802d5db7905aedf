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
	// Refused: the client was answered the refusal of the replicas that
	// did not do the rename (they won), which says it was not done; heal
	// then never takes it as done under To. Without it, the answer was
	// EIO (done by too few replicas: maybe done).
	Refused bool
}

// refusedTag marks a refused rename's record.
const refusedTag = "refused"

// Encode returns the record as stored.
func (r RenameRecord) Encode() []byte {
	s := r.From + "\x00" + r.To
	if r.Refused {
		s += "\x00" + refusedTag
	}
	return []byte(s)
}

// Names reports whether path is one of the record's two names.
func (r RenameRecord) Names(path string) bool { return path == r.From || path == r.To }

// ParseRenameRecord reads a stored record.
func ParseRenameRecord(b []byte) (RenameRecord, bool) {
	parts := strings.Split(string(b), "\x00")
	if len(parts) < 2 || len(parts) > 3 || !strings.HasPrefix(parts[0], "/") || !strings.HasPrefix(parts[1], "/") {
		return RenameRecord{}, false
	}
	r := RenameRecord{From: parts[0], To: parts[1]}
	if len(parts) == 3 {
		if parts[2] != refusedTag {
			return RenameRecord{}, false
		}
		r.Refused = true
	}
	return r, true
}
