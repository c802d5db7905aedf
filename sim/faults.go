package sim

import (
	"errors"
	"syscall"
	"time"
)

// fault injects one random fault, or lifts one, and waits until the
// clients see the network as it now is.
func (r *run) fault() error {
	if err := r.inject(); err != nil {
		return err
	}
	return r.w.settled()
}

func (r *run) inject() error {
	if (r.cfg.Grow || r.cfg.Shrink) && r.rng.IntN(2) == 0 {
		return r.rebalanceStep()
	}
	kinds := 8
	if r.cfg.FullDisks {
		kinds = 12 // disks fill three times as often as they are freed
	}
	switch r.rng.IntN(kinds) {
	case 0, 1:
		r.crashBrick()
	case 2:
		r.restartBrick()
	case 3:
		r.partition()
	case 4:
		r.mend()
	case 5:
		r.slow()
	case 6:
		return r.crashClient()
	case 7:
		return r.crashDuringPut()
	case 8, 9, 10:
		r.fillDisk()
	default:
		r.freeDisk()
	}
	return nil
}

// fillDisk makes a brick's disk full: it refuses new data and new inodes
// with ENOSPC (its reserve set above any free space), as a brick whose
// file system filled up to the reserve does, and still records marks.
func (r *run) fillDisk() {
	b := r.w.bricks[r.rng.IntN(len(r.w.bricks))]
	if b.full {
		return
	}
	r.note("disk of %s full", b.id)
	r.rep.Faults["disk full"]++
	r.w.fill(b, true)
}

// freeDisk gives a full brick its room back.
func (r *run) freeDisk() {
	for _, b := range r.w.bricks {
		if b.full {
			r.note("disk of %s freed", b.id)
			r.w.fill(b, false)
			return
		}
	}
}

// crashBrick kills a running brick, leaving at least one of its set up.
func (r *run) crashBrick() {
	b := r.w.bricks[r.rng.IntN(len(r.w.bricks))]
	if b.srv == nil || r.upInSet(b) <= 1 {
		return
	}
	r.note("crash %s", b.id)
	r.rep.Faults["brick crash"]++
	r.w.crash(b)
}

// upInSet counts the running bricks of b's set.
func (r *run) upInSet(b *brickNode) int {
	var i int
	for k, o := range r.w.bricks {
		if o == b {
			i = k
		}
	}
	set := i / r.setLen * r.setLen
	up := 0
	for _, o := range r.w.bricks[set : set+r.setLen] {
		if o.srv != nil {
			up++
		}
	}
	return up
}

func (r *run) restartBrick() {
	for _, b := range r.w.bricks {
		if b.srv == nil {
			r.note("restart %s", b.id)
			r.rep.Faults["brick restart"]++
			if err := r.w.start(b); err != nil {
				panic(err) // the directory is the test's own
			}
			return
		}
	}
}

// link picks a random link of a live client.
func (r *run) link() (link, int) {
	i := r.rng.IntN(len(r.w.clients))
	b := r.w.bricks[r.rng.IntN(len(r.w.bricks))]
	return link{r.w.clients[i].id, b.addr}, i
}

func (r *run) partition() {
	l, i := r.link()
	r.note("partition client %d from %s", i, l.addr)
	r.rep.Faults["partition"]++
	r.w.net.partition(l, true)
}

func (r *run) mend() {
	l, i := r.link()
	r.note("mend client %d to %s", i, l.addr)
	r.w.net.partition(l, false)
}

func (r *run) slow() {
	l, i := r.link()
	d := time.Duration(r.rng.IntN(5)) * time.Millisecond
	r.note("client %d to %s delayed %v a write", i, l.addr, d)
	r.rep.Faults["slow link"]++
	r.w.net.setSlow(l, d)
}

// crashClient kills a client between operations (files it holds open
// are left open on the bricks).
func (r *run) crashClient() error {
	i := r.rng.IntN(len(r.w.clients))
	r.note("crash client %d (%d files open)", i, len(r.w.clients[i].open))
	r.rep.Faults["client crash"]++
	return r.w.crashClient(i)
}

// crashDuringPut kills a client in the middle of writing a file: each of
// its links dies after a random number (0 to 3) of further writes, so
// the create, the write and the release reach some bricks and not
// others, and the client may die before it can mark anything.
func (r *run) crashDuringPut() error {
	i := r.rng.IntN(len(r.w.clients))
	c := r.w.clients[i]
	for _, b := range r.w.bricks {
		r.w.net.arm(link{c.id, b.addr}, r.rng.IntN(4))
	}
	p, data := r.free(), r.data()
	r.note("client %d dies while it puts %s (%d bytes)", i, p, len(data))
	r.rep.Faults["client crash mid-put"]++
	_, err := putFile(c.graph.Top, p, data)
	if cerr := r.w.crashClient(i); cerr != nil {
		return cerr
	}
	if err == nil {
		r.m.set(p, data) // it was told so: it must stay
	} else {
		r.m.doubt(p)
	}
	if !errors.Is(err, syscall.ENOENT) {
		r.learnt(p)
	}
	return nil
}
