package mgmt

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Store keeps the cluster State and changes it only by applying Commands
// in order: the raftStore, whose Commands are the entries of a Raft log.
type Store interface {
	// Apply applies cmd and returns once the change is durable. On error
	// the state is unchanged.
	Apply(cmd Command) error
	// State returns a copy of the current state, which the caller owns.
	State() *State
	Close() error
}

// writeJSONAtomic replaces path with v encoded as JSON so that a crash
// leaves either the old or the new file, never a torn one.
func writeJSONAtomic(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return writeFileAtomic(path, append(data, '\n'))
}

// writeFileAtomic replaces path with data so that a crash leaves either
// the old or the new file, never a torn one.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*") // 0600; writers may overlap
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
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
	// RaftPort is the port of its Raft traffic, chosen on first start
	// and kept: the other nodes know the node by that address.
	RaftPort int `json:"raft_port,omitempty"`
}

// loadIdentity reads the node's identity from path, making one (with a
// new id) on first start.
func loadIdentity(path string) (nodeIdentity, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		var id nodeIdentity
		if err := json.Unmarshal(data, &id); err != nil || id.ID == "" {
			return id, fmt.Errorf("read node identity %s: bad content", path)
		}
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nodeIdentity{}, fmt.Errorf("read node identity: %w", err)
	}
	id := nodeIdentity{ID: newID()}
	if err := writeJSONAtomic(path, id); err != nil {
		return id, fmt.Errorf("save node identity: %w", err)
	}
	return id, nil
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
