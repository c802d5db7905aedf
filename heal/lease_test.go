package heal

import (
	"testing"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/protocol"
)

// leasingHealer is a healer of the cluster's set through clients of its
// brick servers, taking leases.
func (c *cluster) leasingHealer(clients []*protocol.Client, active func(int) bool) *Healer {
	c.t.Helper()
	set := make(Set, len(clients))
	for i, cl := range clients {
		set[i] = Replica{Name: c.set[i].Name, Layer: cl}
	}
	h, err := New([]Set{set}, Options{Lease: true, Active: active})
	if err != nil {
		c.t.Fatal(err)
	}
	return h
}

// Two healers of one set (two nodes' heal daemons): the one that holds
// the set's lease heals it, the other leaves it alone, a full crawl too;
// once the first one's connections end (its node died), the other heals
// at its next scan.
func TestLeaseOneHealerAtATime(t *testing.T) {
	c := newCluster(t, 3, false)
	connect := c.serve()
	first, second := connect(), connect()
	a, b := c.leasingHealer(first, nil), c.leasingHealer(second, nil)
	c.without2(create("/f1", layer.NewGfid(), []byte("1")))
	scan(a)
	c.healthy()
	c.without2(create("/f2", layer.NewGfid(), []byte("2")))
	scan(b)
	if err := b.Full(bg); err == nil {
		t.Fatal("a full crawl by the healer without the lease succeeded")
	}
	if c.indexed() == 0 {
		t.Fatal("a healer without the set's lease healed it")
	}
	for _, cl := range first {
		cl.Close()
	}
	for deadline := time.Now().Add(10 * time.Second); c.indexed() > 0; scan(b) {
		if time.Now().After(deadline) {
			t.Fatal("the second healer did not heal after the first one's connections ended")
		}
	}
	c.healthy()
}

// A healer that is not active for a set lets its lease go at its next
// scan, and another takes it.
func TestLeaseLetGoWhenInactive(t *testing.T) {
	c := newCluster(t, 3, false)
	connect := c.serve()
	on := true
	a, b := c.leasingHealer(connect(), func(int) bool { return on }), c.leasingHealer(connect(), nil)
	scan(a)
	c.without2(create("/f", layer.NewGfid(), []byte("x")))
	scan(b)
	if c.indexed() == 0 {
		t.Fatal("a healer without the set's lease healed it")
	}
	on = false
	scan(a)
	scan(b)
	c.healthy()
}
