package heal

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// Guards of refusedHere (refused.go), from its review: the records of
// refused renames decide a name only while they say what the replicas
// hold.

// dirsDE is the start of these tests: on every replica of a new
// cluster, directories /d (gfid d) and /e (e), /d/f holding data and
// /e/g holding old.
type dirsDE struct {
	c         *cluster
	data, old []byte
	d, e      layer.Gfid
}

func newDirsDE(t *testing.T) dirsDE {
	x := dirsDE{c: newCluster(t, 3, false), data: pattern(5000, 3), old: pattern(3000, 9), d: layer.NewGfid(), e: layer.NewGfid()}
	x.c.everywhere(seq(mkdir("/d", x.d), mkdir("/e", x.e),
		create("/d/f", layer.NewGfid(), x.data), create("/e/g", layer.NewGfid(), x.old)))
	return x
}

// mark marks path (gfid g) on each replica of who as blaming mask.
func (x dirsDE) mark(t *testing.T, who []int, path string, g layer.Gfid, mask uint64) {
	t.Helper()
	for _, i := range who {
		if err := x.c.stores[i].MarkPending(bg, path, g, mask); err != nil {
			t.Fatal(err)
		}
	}
}

// refusedByTwo is the state the simulation's seed 62 left: /d/f renamed
// over /e/g by replica 0 alone, refused by 1 and 2 (recorded Refused);
// replica 0's /e blames the others for unrelated changes, and their /d
// blame replica 0 (nothing could mark their /e, held elsewhere).
func (x dirsDE) refusedByTwo(t *testing.T) {
	t.Helper()
	x.c.on([]int{0}, refusedRename("/d/f", "/e/g"))
	x.mark(t, []int{0}, "/e", x.e, 0b110)
	x.mark(t, []int{1, 2}, "/d", x.d, 0b001)
}

// refusedRename renames from to to on a replica and records the rename
// as refused by the others (layer.RenameRecord.Refused), as replicate
// does when their refusal wins.
func refusedRename(from, to string) func(context.Context, layer.Layer) error {
	return func(ctx context.Context, l layer.Layer) error {
		if err := l.Rename(ctx, from, to, 0); err != nil {
			return err
		}
		return l.Setxattr(ctx, to, layer.XattrRenamed, layer.RenameRecord{From: from, To: to, Refused: true}.Encode(), 0)
	}
}

// link makes to a hard link of from.
func link(from, to string) func(context.Context, layer.Layer) error {
	return func(ctx context.Context, l layer.Layer) error {
		_, err := l.Link(ctx, from, to)
		return err
	}
}

// absentEverywhere checks that no replica holds p.
func (c *cluster) absentEverywhere(t *testing.T, p string) {
	t.Helper()
	for i := range c.stores {
		if a, err := c.stores[i].Lookup(bg, p); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("replica %d holds %s: %v %v", i, p, a.Gfid, err)
		}
	}
}

// Refuser 2 missed an acknowledged unlink of /e/g (0 and 1 did it). Then
// a rename /d/f -> /e/g done by 0 alone, refused by 1 and 2 (Refused):
// /e/g must stay removed (judged by 1 and 2, whose removal record
// decides), and /d/f stay.
func TestRefusedRenameOverARemovedName(t *testing.T) {
	for _, first := range []string{"/d", "/e", ""} {
		t.Run("first="+first, func(t *testing.T) {
			x := newDirsDE(t)
			c, data, d, e := x.c, x.data, x.d, x.e
			c.without2(unlink("/e/g"))
			if err := refusedRename("/d/f", "/e/g")(bg, c.stores[0]); err != nil {
				t.Fatal(err)
			}
			x.mark(t, []int{1, 2}, "/d", d, 0b001)
			x.mark(t, []int{1, 2}, "/e", e, 0b001)
			c.healFirst(first)
			c.absentEverywhere(t, "/e/g")
			for i := range c.stores {
				sameBytes(t, fmt.Sprintf("replica %d's /d/f", i), c.content(i, "/d/f"), data)
			}
		})
	}
}

// Once heal has undone the refused rename (the sim's case: replica 0's
// /e blames the others, theirs of /d blame it), no replica keeps its
// record: left, it would judge the file's names later.
func TestRefusedRenameRecordCleared(t *testing.T) {
	for _, first := range []string{"/d", "/e", ""} {
		t.Run("first="+first, func(t *testing.T) {
			x := newDirsDE(t)
			c := x.c
			x.refusedByTwo(t)
			c.healFirst(first)
			for i := range c.stores {
				if v, err := c.stores[i].Getxattr(bg, "/d/f", layer.XattrRenamed); err == nil {
					r, _ := layer.ParseRenameRecord(v)
					t.Errorf("replica %d's /d/f keeps record %+v", i, r)
				}
			}
		})
	}
}

// A Refused record left on replica 0's S (the rename later retried and
// acknowledged by 1 and 2: all hold S at /e/g; a fenced rename retried
// on a newer graph did so before fences were no longer recorded as
// refusals). Later S is linked as
// /x/g by 0 and 1 (2 down), where 2 still holds Z (it missed the
// acknowledged unlink of /x/g). /x/g must be S everywhere: the record
// is stale, since the others hold S at /e/g too, and distrusted replica
// 0 for /x/g, trusting replica 2's stale Z (a split-brain).
func TestStaleRefusedRecordDistrustsNothing(t *testing.T) {
	c := newCluster(t, 3, false)
	data, old, z := pattern(5000, 3), pattern(3000, 9), pattern(2000, 5)
	d, e, x := layer.NewGfid(), layer.NewGfid(), layer.NewGfid()
	c.everywhere(seq(mkdir("/d", d), mkdir("/e", e), mkdir("/x", x),
		create("/d/f", layer.NewGfid(), data), create("/e/g", layer.NewGfid(), old), create("/x/g", layer.NewGfid(), z)))
	if err := refusedRename("/d/f", "/e/g")(bg, c.stores[0]); err != nil {
		t.Fatal(err)
	}
	// the retry, acknowledged by 1 and 2; 0 (ENOENT) marked
	c.on([]int{1, 2}, func(ctx context.Context, l layer.Layer) error { return l.Rename(ctx, "/d/f", "/e/g", 0) })
	c.without2(unlink("/x/g"))
	c.without2(link("/e/g", "/x/g"))
	c.healFirst("/x")
	for i := range c.stores {
		sameBytes(t, fmt.Sprintf("replica %d's /x/g", i), c.content(i, "/x/g"), data)
		sameBytes(t, fmt.Sprintf("replica %d's /e/g", i), c.content(i, "/e/g"), data)
	}
}

// Refuser 2 missed an acknowledged unlink and re-create of /e/g (0 and 1
// did it: Y). Then 0 alone renames /d/f over /e/g, refused by 1 and 2.
// /e/g must be Y everywhere.
func TestRefusedRenameOverARemadeName(t *testing.T) {
	for _, first := range []string{"/d", "/e", ""} {
		t.Run("first="+first, func(t *testing.T) {
			x := newDirsDE(t)
			c, data, d, e, y := x.c, x.data, x.d, x.e, pattern(1000, 7)
			c.without2(seq(unlink("/e/g"), create("/e/g", layer.NewGfid(), y)))
			if err := refusedRename("/d/f", "/e/g")(bg, c.stores[0]); err != nil {
				t.Fatal(err)
			}
			x.mark(t, []int{1, 2}, "/d", d, 0b001)
			x.mark(t, []int{1, 2}, "/e", e, 0b001)
			c.healFirst(first)
			for i := range c.stores {
				sameBytes(t, fmt.Sprintf("replica %d's /e/g", i), c.content(i, "/e/g"), y)
				sameBytes(t, fmt.Sprintf("replica %d's /d/f", i), c.content(i, "/d/f"), data)
			}
		})
	}
}
