package heal

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/mortarfs/mortar/layer"
)

// MaxListed is how many index entries Info lists per replica (Count
// counts them all).
const MaxListed = 1000

// Info is what `heal info` shows.
type Info struct {
	Replicas []ReplicaInfo `json:"replicas"`
	// Healed and Failed count inodes since the healer started (Since);
	// HealedBytes counts the file data it wrote to sinks (for a
	// dispersed file, the fragment records it rewrote), Looked the inodes
	// it looked at (a full heal's crawl visits every one).
	Healed      uint64    `json:"healed"`
	Failed      uint64    `json:"failed"`
	HealedBytes uint64    `json:"healed_bytes"`
	Looked      uint64    `json:"looked"`
	Since       time.Time `json:"since"`
	// InProgress is how many index entries are being healed now.
	InProgress int `json:"in_progress"`
	// LastScan is when Run last scanned the indexes (zero: never).
	LastScan time.Time `json:"last_scan"`
	// SplitBrain is how many inodes were in split-brain when last looked
	// at (by a heal or by SplitBrain).
	SplitBrain int `json:"split_brain"`
}

// ReplicaInfo is one replica's heal index.
type ReplicaInfo struct {
	Set     int          `json:"set"`
	Name    string       `json:"name"`
	Up      bool         `json:"up"`
	Count   int          `json:"count"`
	Entries []IndexEntry `json:"entries,omitempty"` // the first MaxListed
	Error   string       `json:"error,omitempty"`   // the index could not be read
}

// IndexEntry is an inode a replica lists as needing heal.
type IndexEntry struct {
	Path    string     `json:"path"` // where it was when marked
	Gfid    layer.Gfid `json:"gfid"`
	Pending []string   `json:"pending,omitempty"` // the replicas it blames
	// Dirty: a client is writing the file on a disperse set, or died
	// while writing it (layer.Dirty); heal checks it once it is quiet.
	Dirty bool `json:"dirty,omitempty"`
}

// Info reads the heal index of every reachable replica and returns it with
// the healer's counters.
func (h *Healer) Info(ctx context.Context) (Info, error) {
	var info Info
	for si, s := range h.sets {
		for i, r := range s {
			ri := ReplicaInfo{Set: si, Name: r.Name, Up: h.up(si, i)}
			if ri.Up {
				entries, err := h.listIndex(ctx, si, i)
				if err != nil {
					if ctx.Err() != nil {
						return Info{}, ctx.Err()
					}
					ri.Error = err.Error()
				}
				ri.Count = len(entries)
				for _, e := range entries[:min(len(entries), MaxListed)] {
					ri.Entries = append(ri.Entries, IndexEntry{
						Path: e.Path, Gfid: e.Gfid, Pending: h.names(si, e.Pending), Dirty: e.Pending&layer.Dirty != 0,
					})
				}
			}
			info.Replicas = append(info.Replicas, ri)
		}
	}
	stats := h.Stats(ctx)
	stats.Replicas = info.Replicas
	return stats, nil
}

// Stats is Info without the heal indexes: what this healer did.
func (h *Healer) Stats(ctx context.Context) Info {
	var info Info
	info.Healed, info.Failed = h.healed.Load(), h.failed.Load()
	info.HealedBytes, info.Looked, info.Since = h.bytes.Load(), h.looked.Load(), h.started
	info.InProgress = int(h.active.Load())
	h.recheckSplits(ctx)
	h.mu.Lock()
	info.LastScan, info.SplitBrain = h.lastScan, len(h.split)
	h.mu.Unlock()
	return info
}

// recheckSplits judges again the split-brains the healer met: one a
// directory heal saw under a name is in no index, and would otherwise be
// counted until something healed that name again, even if it was only a
// look at copies changing under it.
func (h *Healer) recheckSplits(ctx context.Context) {
	h.mu.Lock()
	keys := slices.Collect(maps.Keys(h.split))
	h.mu.Unlock()
	for _, k := range keys {
		if ctx.Err() != nil {
			return
		}
		e, split := h.judgeSplit(ctx, k.set, k.path)
		h.noteSplit(k.set, k.path, e.Gfid, split)
	}
}

// Pending sums the index entries of every replica.
func (i Info) Pending() int {
	n := 0
	for _, r := range i.Replicas {
		n += r.Count
	}
	return n
}

// Looked is how many inodes the healer has looked at since it started.
func (h *Healer) Looked() uint64 { return h.looked.Load() }
