package writebehind

import (
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/layertest"
)

// leaser owns every name; its OwnsName lets a hook run (a recall that the
// connection reads at that moment).
type leaser struct {
	*layertest.Counting
	hook func()
}

func (l *leaser) OwnsName(path string) (layer.Attr, bool) {
	if l.hook != nil {
		l.hook()
	}
	return layer.Attr{Mode: syscall.S_IFDIR | 0o755}, true
}

func (l *leaser) MadeName(string) bool { return false }

// A recall that comes just after OwnsName said yes finds the file among
// the windows (holdCreate holds w.mu for that) and sends it before it
// returns: the lease is returned right after Recall. (Found by review:
// Recall looked at the count of windows without the lock, and saw none.)
func TestRecallRacingHoldCreate(t *testing.T) {
	count := layertest.NewCounting(newStore(t))
	ll := &leaser{Counting: count}
	w := NewWindows(0)
	l := New(ll, Options{Windows: w, CreateBehind: true})
	recalled := make(chan struct{})
	ll.hook = func() {
		ll.hook = nil
		// The protocol client: recallDir dropped the lease already; its
		// goroutine calls OnRecall, then returns the lease.
		go func() { w.Recall("/"); close(recalled) }()
		select {
		case <-recalled:
		case <-time.After(200 * time.Millisecond):
		}
	}
	f, _, err := l.Create(bg, "/f", layer.CreateIn{Mode: 0o644, Flags: syscall.O_WRONLY | syscall.O_EXCL})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(bg)
	select {
	case <-recalled:
	case <-time.After(10 * time.Second):
		t.Fatal("the create was not held back (no lease asked?)")
	}
	// The lease goes back now: another client may make /f.
	if n := count.Count("Create"); n == 0 {
		t.Errorf("Recall returned (the lease goes back) with the create of /f still held")
	}
}
