package proof

import (
	"fmt"
	"sync"
	"time"
)

// Replays accepts a stamped message once: only if its time is within
// Window of this machine's clock, it is not older than the cache (a
// message from before a restart cannot be told from a replay), and its
// nonce was not accepted before. Check it only on messages whose MAC holds,
// so that nobody without the secret can fill the cache.
//
// A nonce stays remembered at least twice the window after it was
// accepted — as long as its time can stay within the window — in two
// generations of that length each: memory is bounded by the messages of
// four windows at most, and Check refuses all but Max in one generation.
type Replays struct {
	Window time.Duration
	Max    int // nonces per generation
	// Grace is how far before the cache's start a message may be stamped
	// (the sender's clock may be a little behind).
	Grace time.Duration

	now      func() time.Time // time.Now but in tests
	mu       sync.Mutex
	start    time.Time
	since    time.Time // when cur began
	cur, old map[string]struct{}
}

// NewReplays returns a cache of nonces accepted within window of now,
// Max of them per generation, with a Grace of two seconds.
func NewReplays(window time.Duration, max int) *Replays {
	now := time.Now()
	return &Replays{Window: window, Max: max, Grace: 2 * time.Second, now: time.Now, start: now, since: now,
		cur: map[string]struct{}{}, old: map[string]struct{}{}}
}

// Check accepts the message stamped at, carrying nonce, or says why not.
func (r *Replays) Check(at time.Time, nonce string) error {
	now := r.now()
	if err := r.fresh(at, now); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rotate(now)
	_, inCur := r.cur[nonce]
	_, inOld := r.old[nonce]
	if inCur || inOld {
		return fmt.Errorf("replayed: a message with this nonce was accepted already")
	}
	if len(r.cur) >= r.Max {
		return fmt.Errorf("too many signed messages in the last %v (%d): refused until older ones expire", 2*r.Window, r.Max)
	}
	r.cur[nonce] = struct{}{}
	return nil
}

// fresh refuses a time outside the window, or from before the cache.
func (r *Replays) fresh(at, now time.Time) error {
	if d := now.Sub(at); d > r.Window || d < -r.Window {
		return fmt.Errorf("stamped %s, %v from this machine's clock: only ±%v is accepted (are the clocks synchronised?)",
			at.UTC().Format(time.RFC3339), d.Round(time.Second), r.Window)
	}
	if at.Before(r.start.Add(-r.Grace)) {
		return fmt.Errorf("stamped %s, before this process started at %s: a message from before a restart cannot be told from a replay (send it again; or the sender's clock is behind)",
			at.UTC().Format(time.RFC3339), r.start.UTC().Format(time.RFC3339))
	}
	return nil
}

// rotate starts a new generation every two windows.
func (r *Replays) rotate(now time.Time) {
	age := now.Sub(r.since)
	if age < 2*r.Window {
		return
	}
	r.old, r.cur, r.since = r.cur, map[string]struct{}{}, now
	if age >= 4*r.Window { // every nonce of cur was accepted over 2 windows ago
		r.old = map[string]struct{}{}
	}
}
