package mgmt

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// Store keeps the cluster State and changes it only by applying Commands
// in order. Today's store is a JSON file on one node; a replicated store
// (Raft, carrying the same Commands) takes its place when nodes can join.
type Store interface {
	// Apply applies cmd and returns once the change is durable. On error
	// the state is unchanged.
	Apply(cmd Command) error
	// State returns a copy of the current state, which the caller owns.
	State() *State
	Close() error
}

// fileStore is a Store persisted as one JSON file, rewritten atomically
// (temporary file, fsync, rename, fsync of the directory) after every
// command.
type fileStore struct {
	path string

	mu    sync.Mutex
	state *State
}

// openFileStore loads the state from path, or starts empty when the file
// does not exist.
func openFileStore(path string) (*fileStore, error) {
	st := NewState()
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read state: %w", err)
	default:
		if err := json.Unmarshal(data, st); err != nil {
			return nil, fmt.Errorf("read state %s: %w", path, err)
		}
		// A state written by hand or by an older version may lack maps.
		st = st.Clone()
	}
	return &fileStore{path: path, state: st}, nil
}

func (s *fileStore) Apply(cmd Command) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.state.Clone()
	if err := next.Apply(cmd); err != nil {
		return err
	}
	if err := writeJSONAtomic(s.path, next); err != nil {
		return fmt.Errorf("apply %s: %w", cmd.Op, err)
	}
	s.state = next
	return nil
}

func (s *fileStore) State() *State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.Clone()
}

func (s *fileStore) Close() error { return nil }

// writeJSONAtomic replaces path with v encoded as JSON so that a crash
// leaves either the old or the new file, never a torn one.
func writeJSONAtomic(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	data = append(data, '\n')
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// nodeIdentity is the node's own, local identity, kept beside the state.
type nodeIdentity struct {
	ID string `json:"id"`
}

// loadIdentity reads the node's id from path, making one on first start.
func loadIdentity(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		var id nodeIdentity
		if err := json.Unmarshal(data, &id); err != nil || id.ID == "" {
			return "", fmt.Errorf("read node identity %s: bad content", path)
		}
		return id.ID, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read node identity: %w", err)
	}
	id := nodeIdentity{ID: newID()}
	if err := writeJSONAtomic(path, id); err != nil {
		return "", fmt.Errorf("save node identity: %w", err)
	}
	return id.ID, nil
}

// lockDataDir takes an exclusive lock on dir so that two servers never
// share one data directory. The lock lasts until the returned file is
// closed (or the process exits).
func lockDataDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data dir %s is in use by another mortar server", dir)
		}
		return nil, fmt.Errorf("lock data dir %s: %w", dir, err)
	}
	return f, nil
}
