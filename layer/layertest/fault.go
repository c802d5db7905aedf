package layertest

import (
	"sync"

	"github.com/mortarfs/mortar/layer"
)

// Fault wraps a layer and makes chosen operations fail, for fault tests.
// Operations are named by their method name: "Lookup", "LookupData",
// "Create", ... for the layer and "Read", "Write", "Getattr", "FileSetattr"
// (File.Setattr), "Fsync", "Fallocate", "Flush", "Getlk", "Setlk",
// "Release" for its Files. (LookupData of a child that has none is its
// Lookup, content not given.)
// A failed Release still releases the child's File.
type Fault struct {
	hooked
	mu    sync.Mutex
	fails map[string]error
}

var (
	_ layer.Layer      = (*Fault)(nil)
	_ layer.DataLooker = (*Fault)(nil)
)

// NewFault wraps child; nothing fails until Fail is called.
func NewFault(child layer.Layer) *Fault {
	f := &Fault{fails: map[string]error{}}
	f.hooked = hooked{child: child, before: f.check}
	return f
}

// Fail makes every later call of op fail with err (nil: succeed again).
func (f *Fault) Fail(op string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.fails, op)
		return
	}
	f.fails[op] = err
}

// Clear makes every operation succeed again.
func (f *Fault) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.fails)
}

func (f *Fault) check(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fails[op]
}

// Counting wraps a layer and counts the calls of each operation, named as
// for Fault.
type Counting struct {
	hooked
	mu     sync.Mutex
	counts map[string]int
}

var (
	_ layer.Layer      = (*Counting)(nil)
	_ layer.DataLooker = (*Counting)(nil)
)

// NewCounting wraps child with all counts zero.
func NewCounting(child layer.Layer) *Counting {
	c := &Counting{counts: map[string]int{}}
	c.hooked = hooked{child: child, before: c.count}
	return c
}

// Count returns how many times op was called since the last Reset.
func (c *Counting) Count(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[op]
}

// Total returns the number of calls of all operations since the last Reset.
func (c *Counting) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range c.counts {
		n += k
	}
	return n
}

// Reset sets every count to zero.
func (c *Counting) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.counts)
}

func (c *Counting) count(op string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[op]++
	return nil
}
