package mgmt

import (
	"testing"
	"time"

	"github.com/mortarfs/mortar/mgmt/api"
)

// Heal info on the acting node adds what the other nodes' daemons did:
// counts summed, the earliest start, the latest scan, and their parts of
// a full heal merged (running while one runs, errors kept).
func TestHealCountsAddUp(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	hi := api.HealInfo{Healed: 3, Failed: 1, HealedBytes: 100, InProgress: 1, SplitBrain: 1, Since: t0.Add(time.Minute), LastScan: t0,
		Full: &api.FullHeal{Started: t0.Add(time.Second), Finished: t0.Add(5 * time.Second), Looked: 10}}
	hi.AddCounts(api.HealInfo{Healed: 2, HealedBytes: 50, SplitBrain: 2, Since: t0, LastScan: t0.Add(time.Hour),
		Full: &api.FullHeal{Running: true, Started: t0, Looked: 7, Error: "set 1: no reachable copy"}})
	hi.AddCounts(api.HealInfo{Healed: 1}) // a node whose daemon did little, no full heal
	f := hi.Full
	switch {
	case hi.Healed != 6 || hi.Failed != 1 || hi.HealedBytes != 150 || hi.InProgress != 1:
		t.Errorf("counts %+v", hi)
	case hi.SplitBrain != 2 || !hi.Since.Equal(t0) || !hi.LastScan.Equal(t0.Add(time.Hour)):
		t.Errorf("split-brains %d, since %v, last scan %v", hi.SplitBrain, hi.Since, hi.LastScan)
	case f == nil || !f.Running || !f.Finished.IsZero() || f.Looked != 17 || !f.Started.Equal(t0) || f.Error != "set 1: no reachable copy":
		t.Errorf("full heal %+v", f)
	}
}
