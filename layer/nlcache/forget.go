package nlcache

import (
	"context"

	"github.com/mortarfs/mortar/layer"
)

var _ layer.Forgetter = (*Layer)(nil)

// Forget takes in a change another client made (layer.Change): a name
// made or removed there may exist now, so its directory stops answering
// it absent, and what is known of the directories at and below it (a
// directory renamed or removed) is forgotten. A listing under way is not
// trusted. Changes to an inode's content or attributes change no names.
func (l *Layer) Forget(c layer.Change) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.All {
		for _, d := range l.dirs {
			d.gen++
		}
		clear(l.dirs)
		return
	}
	if !c.Entry || c.Path == "/" {
		return
	}
	parent, name := layer.Split(c.Path)
	if d := l.dirs[parent]; d != nil {
		d.gen++
		if d.names != nil {
			d.names[name] = struct{}{}
		}
	}
	l.forgetTree(c.Path)
}

// Sync passes on (layer.Syncer).
func (l *Layer) Sync(ctx context.Context) error { return layer.Sync(ctx, l.Child) }
