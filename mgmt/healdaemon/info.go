package healdaemon

import (
	"context"
	"fmt"
	"strings"

	"github.com/mortarfs/mortar/heal"
	"github.com/mortarfs/mortar/mgmt/api"
)

// What a daemon reports: heal info, split-brain entries.

// Info reads every brick's heal index, with this daemon's counts.
func (d *Daemon) Info(ctx context.Context) (api.HealInfo, error) {
	r, err := d.running()
	if err != nil {
		return api.HealInfo{}, err
	}
	hi, err := r.healer.Info(ctx)
	if err != nil {
		return api.HealInfo{}, err
	}
	out := d.countsOf(r, hi)
	for _, ri := range hi.Replicas {
		hb := api.HealBrick{Name: ri.Name, Set: ri.Set, Online: ri.Up, Entries: ri.Count, Error: ri.Error}
		for _, e := range ri.Entries {
			hb.Paths = append(hb.Paths, entryName(e.Path, e.Gfid.String()))
		}
		out.Bricks = append(out.Bricks, hb)
	}
	return out, nil
}

// Counts is what this daemon did (HealInfo without the bricks), for the
// acting node's heal info.
func (d *Daemon) Counts(ctx context.Context) (api.HealInfo, error) {
	r, err := d.running()
	if err != nil {
		return api.HealInfo{}, err
	}
	return d.countsOf(r, r.healer.Stats(ctx)), nil
}

// countsOf turns hi, read from r's healer, into HealInfo's counts, with
// the last full heal.
func (d *Daemon) countsOf(r *Healer, hi heal.Info) api.HealInfo {
	out := api.HealInfo{
		Name: d.name, Bricks: []api.HealBrick{}, Healed: hi.Healed, Failed: hi.Failed,
		HealedBytes: hi.HealedBytes, Since: hi.Since,
		InProgress: hi.InProgress, SplitBrain: hi.SplitBrain, LastScan: hi.LastScan,
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.full != nil {
		f := *d.full
		if f.Running && d.crawl == r && hi.Looked >= d.lookedAt { // a crawl begun since hi was read: not yet
			f.Looked = hi.Looked - d.lookedAt
		}
		out.Full = &f
	}
	return out
}

// entryName is how heal info shows an inode: its path, or its gfid as
// GlusterFS writes it when the path is unknown.
func entryName(path, gfid string) string {
	if path == "" {
		return "<gfid:" + gfid + ">"
	}
	return path
}

// SplitBrain lists the inodes in split-brain, per brick (under every brick
// that has a copy) and with each copy's details.
func (d *Daemon) SplitBrain(ctx context.Context) (api.SplitBrainInfo, error) {
	r, err := d.running()
	if err != nil {
		return api.SplitBrainInfo{}, err
	}
	entries, err := r.healer.SplitBrain(ctx)
	if err != nil {
		return api.SplitBrainInfo{}, err
	}
	out := api.SplitBrainInfo{Name: d.name, Bricks: []api.HealBrick{}, Entries: []api.SplitBrainEntry{}}
	at := map[string]int{} // brick name → index in out.Bricks
	for si, s := range r.sets {
		for _, rep := range s {
			at[rep.Name] = len(out.Bricks)
			out.Bricks = append(out.Bricks, api.HealBrick{Name: rep.Name, Set: si, Online: rep.Up()})
		}
	}
	for _, e := range entries {
		se := api.SplitBrainEntry{Set: e.Set, Path: e.Path, Gfid: e.Gfid.String()}
		for _, c := range e.Copies {
			sc := api.SplitBrainCopy{Brick: c.Replica, Error: c.Error, Blames: c.Pending}
			if c.Error == "" {
				sc.Gfid, sc.Size, sc.Mtime = c.Gfid.String(), c.Size, c.Mtime
				if i, ok := at[c.Replica]; ok {
					hb := &out.Bricks[i]
					hb.Entries++
					hb.Paths = append(hb.Paths, entryName(e.Path, se.Gfid))
				}
			}
			se.Copies = append(se.Copies, sc)
		}
		out.Entries = append(out.Entries, se)
	}
	return out, nil
}

// Heal triggers an index heal, or starts a full heal, of the sets
// this node's daemon acts for.
func (d *Daemon) Heal(full bool) (api.FullHeal, error) {
	if full {
		return d.startFull()
	}
	return api.FullHeal{}, d.trigger()
}

// Resolve settles the split-brain that req names (a path, a policy, a
// source brick) in the volume, or in replica set set only (-1: every
// set), and returns the paths it resolved.
func (d *Daemon) Resolve(ctx context.Context, req api.SplitBrainRequest, set int) ([]string, error) {
	r, err := d.running()
	if err != nil {
		return nil, err
	}
	entries, err := r.healer.SplitBrain(ctx)
	if err != nil {
		return nil, err
	}
	paths := []string{}
	for _, e := range entries {
		if (req.Path == "" || e.Path == req.Path) && (set < 0 || e.Set == set) {
			paths = append(paths, e.Path)
		}
	}
	where := "volume " + d.name
	if set >= 0 {
		where = "the replica set of brick " + req.Source
	}
	switch {
	case len(paths) == 0 && req.Path != "":
		return nil, api.Errorf(api.ErrInvalid, "%s is not in split-brain in %s (see mortar volume heal %s info split-brain)", req.Path, where, d.name)
	case len(paths) == 0:
		return nil, api.Errorf(api.ErrInvalid, "nothing is in split-brain in %s", where)
	}
	if err := r.healer.Resolve(ctx, req.Path, req.Policy, req.Source); err != nil {
		return nil, fmt.Errorf("resolving the split-brain of %s: %w", strings.Join(paths, ", "), err)
	}
	return paths, nil
}
