package quickread

import (
	"context"
	"strings"
	"sync"
)

// inMemory is the set of open files served from memory that have not
// opened the child's file yet.
type inMemory struct {
	mu    sync.Mutex
	files map[*file]struct{}
}

func (m *inMemory) add(f *file) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.files == nil {
		m.files = map[*file]struct{}{}
	}
	m.files[f] = struct{}{}
}

func (m *inMemory) remove(f *file) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.files, f)
}

// under returns the files opened at one of paths or below one of them.
func (m *inMemory) under(paths ...string) []*file {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*file
	for f := range m.files {
		for _, p := range paths {
			if f.path == p || strings.HasPrefix(f.path, p) && f.path[len(p)] == '/' {
				out = append(out, f)
				break
			}
		}
	}
	return out
}

// pin opens the child's file of every file served from memory at paths or
// below them, before an unlink or a rename takes the names away: an open
// file must still reach its inode afterwards, and the child's files are
// opened by path (there is no open by gfid). A file that fails to open
// stays as it was (stale once it needs the child).
func (l *Layer) pin(ctx context.Context, paths ...string) {
	for _, f := range l.mem.under(paths...) {
		f.child(ctx)
	}
}

// at returns the files opened at path.
func (m *inMemory) at(path string) []*file {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*file
	for f := range m.files {
		if f.path == path {
			out = append(out, f)
		}
	}
	return out
}
