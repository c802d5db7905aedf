package mgmt

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/mortarfs/mortar/internal/atomicfile"
	"github.com/mortarfs/mortar/mgmt/raftstore"
	"github.com/mortarfs/mortar/mgmt/state"
)

// Store keeps the cluster State and changes it only by applying Commands
// in order: a raftstore.Store, whose Commands are the entries of a Raft log.
type Store interface {
	// Apply applies cmd and returns once the change is durable. On error
	// the state is unchanged.
	Apply(cmd state.Command) error
	// State returns a copy of the current state, which the caller owns.
	State() *state.State
	Close() error
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
	if err := atomicfile.WriteJSON(path, id); err != nil {
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

// The Raft store is the node's Store.
var _ Store = (*raftstore.Store)(nil)
