package quickread

import "github.com/mortarfs/mortar/layer"

var _ layer.Forgetter = (*Layer)(nil)

// Forget takes in a change another client made (layer.Change): the
// content kept for the path (and, for a name, for the names below it) is
// dropped and a lookup under way keeps nothing. A change to the inode at
// the path also makes files open from memory there read from the brick
// from then on; a change of the name does not (they keep their inode).
func (l *Layer) Forget(c layer.Change) {
	switch {
	case c.All:
		l.cache.forgetAll()
	case c.Entry:
		l.cache.dropTrees(c.Path)
	default:
		// Not under f.mu: Forget runs on a brick connection's reader,
		// and a file opening its child holds f.mu until that connection
		// answers.
		for _, f := range l.mem.at(c.Path) {
			l.cache.changedInode(f.memGfid, l.opts.Now())
		}
		l.cache.dropInode(c.Path, l.opts.Now())
	}
}
