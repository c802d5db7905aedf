package api

import (
	"fmt"
	"strings"
	"time"
)

// AddCounts adds another node's daemon's counts to h: sums, the earliest
// start, the latest scan, and the full heals merged (running if one
// runs).
func (h *HealInfo) AddCounts(o HealInfo) {
	h.Healed += o.Healed
	h.Failed += o.Failed
	h.HealedBytes += o.HealedBytes
	h.InProgress += o.InProgress
	h.SplitBrain = max(h.SplitBrain, o.SplitBrain)
	if !o.Since.IsZero() && (h.Since.IsZero() || o.Since.Before(h.Since)) {
		h.Since = o.Since
	}
	if o.LastScan.After(h.LastScan) {
		h.LastScan = o.LastScan
	}
	if o.Full == nil {
		return
	}
	if h.Full == nil {
		f := *o.Full
		h.Full = &f
		return
	}
	h.Full.merge(*o.Full)
}

// merge adds another node's part of a full heal to f.
func (f *FullHeal) merge(o FullHeal) {
	f.Running, f.Again = f.Running || o.Running, f.Again || o.Again
	f.Looked += o.Looked
	if o.Started.Before(f.Started) {
		f.Started = o.Started
	}
	if o.Finished.After(f.Finished) {
		f.Finished = o.Finished
	}
	if f.Running {
		f.Finished = time.Time{}
	}
	if o.Error != "" {
		f.Error = strings.TrimPrefix(f.Error+"; "+o.Error, "; ")
	}
}

// SafeToTakeDown reports whether a brick of the volume may be taken down
// now (the next brick of a rolling restart): every brick is online and
// connected to the heal daemon, no brick records anything to heal, no heal
// is under way, nothing is in split-brain and no full heal runs. If not,
// it says what is missing. Clients' own connections are not seen here:
// a client in use reconnects within 100 ms of a brick's return (its
// writes would otherwise be recorded as entries to heal), an idle one
// within its backoff of at most 2 s.
func (h HealInfo) SafeToTakeDown() (bool, string) {
	var why []string
	for _, b := range h.Bricks {
		switch {
		case !b.Online:
			why = append(why, "brick "+b.Name+" is not connected")
		case b.Error != "":
			why = append(why, fmt.Sprintf("brick %s cannot be asked: %s", b.Name, b.Error))
		case b.Entries > 0:
			why = append(why, fmt.Sprintf("brick %s has %d %s to heal", b.Name, b.Entries, plural(b.Entries, "entry", "entries")))
		}
	}
	if h.InProgress > 0 {
		why = append(why, fmt.Sprintf("%d %s being healed", h.InProgress, plural(h.InProgress, "entry is", "entries are")))
	}
	if h.SplitBrain > 0 {
		why = append(why, fmt.Sprintf("%d %s in split-brain", h.SplitBrain, plural(h.SplitBrain, "file is", "files are")))
	}
	if h.Full != nil && h.Full.Running {
		why = append(why, "a full heal is running")
	}
	if len(h.Bricks) == 0 {
		why = append(why, "no brick")
	}
	return len(why) == 0, strings.Join(why, "; ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
