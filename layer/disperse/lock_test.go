package disperse

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/heal"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/protocol"
	"github.com/mortarfs/mortar/layer/replicate"
)

// client is another client of the rig's bricks: its own connections and
// its own disperse layer.
type client struct {
	d     *Disperse
	conns []*protocol.Client
}

func (g *rig) newClient() *client {
	g.t.Helper()
	c := &client{}
	var children []replicate.Child
	for i, b := range g.bricks {
		pc := protocol.New(protocol.Config{Addr: b.Addr, BrickID: b.ID, VolumeID: testVolume, ConnectWait: time.Second})
		g.t.Cleanup(func() { pc.Close() })
		c.conns = append(c.conns, pc)
		children = append(children, replicate.Child{Name: g.set.Name(i), Layer: pc, Up: pc.Connected})
	}
	deadline := time.Now().Add(10 * time.Second)
	for i, pc := range c.conns {
		for g.bricks[i].Running() && !pc.Connected() {
			if time.Now().After(deadline) {
				g.t.Fatal("second client: not connected after 10s")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	d, err := New(children, g.d.g.M, Options{})
	if err != nil {
		g.t.Fatal(err)
	}
	c.d = d
	return c
}

// die closes the client's connections, as a killed client process does.
func (c *client) die() {
	for _, pc := range c.conns {
		pc.Close()
	}
}

// chunkOf is the content writer w writes to chunk c in round r: its
// first 24 bytes say who, the rest follows from them.
func chunkOf(w, r, c int) []byte {
	p := make([]byte, Chunk)
	binary.LittleEndian.PutUint64(p[0:], uint64(w))
	binary.LittleEndian.PutUint64(p[8:], uint64(r))
	binary.LittleEndian.PutUint64(p[16:], uint64(c))
	rand.New(rand.NewSource(int64(w<<40 | r<<8 | c))).Read(p[24:])
	return p
}

// whoWrote says which writer and round a chunk is, if it is one of
// chunkOf's whole.
func whoWrote(p []byte) (w, r, c int, ok bool) {
	w = int(binary.LittleEndian.Uint64(p[0:]))
	r = int(binary.LittleEndian.Uint64(p[8:]))
	c = int(binary.LittleEndian.Uint64(p[16:]))
	return w, r, c, w < 8 && r < 1<<20 && c < 64 && bytes.Equal(p, chunkOf(w, r, c))
}

// Two clients write the chunks of one stripe at the same time, rounds of
// 64 KiB writes (the small path) and, from one of them, whole-stripe
// writes. Every write succeeds; afterwards each chunk is the last round of
// one writer, whole; every brick holds one version of the stripe, and
// nothing is left pending. The same for two open files of one client.
// MORTAR_FAULT_FULL (scripts/fault): 200 rounds.
func TestTwoClientsOneStripe(t *testing.T) {
	t.Run("two clients", func(t *testing.T) {
		g := newRig(t, 6, 2)
		twoWriters(t, g, []*Disperse{g.d, g.newClient().d}, g.newClient().d)
	})
	t.Run("one client, two open files", func(t *testing.T) {
		g := newRig(t, 6, 2)
		twoWriters(t, g, []*Disperse{g.d, g.d}, nil)
	})
	// With a data brick down, a read racing a write finds the stripe
	// with no version on K bricks and a data chunk missing: it reads it
	// again under the writers' lock instead of failing.
	t.Run("two clients, a data brick down", func(t *testing.T) {
		g := newRig(t, 6, 2)
		g.writeFile("/f", make([]byte, 4*g.d.g.Stripe()))
		g.kill(0)
		twoWriters(t, g, []*Disperse{g.d, g.newClient().d}, g.newClient().d)
	})
}

// twoWriters runs TestTwoClientsOneStripe's writers, one through each
// layer, and checks what they leave. A reader (unless nil) reads the
// stripe meanwhile: every read succeeds, every chunk whole.
func twoWriters(t *testing.T, g *rig, layers []*Disperse, reader *Disperse) {
	ctx := g.ctx
	stripe := g.d.g.Stripe()
	chunks := int(stripe / Chunk)
	degraded := !g.bricks[0].Running()
	if !degraded {
		g.writeFile("/f", make([]byte, 4*stripe))
	}
	rounds := 25
	if os.Getenv("MORTAR_FAULT_FULL") != "" { // scripts/fault
		rounds = 200
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*rounds*chunks)
	for w, d := range layers {
		wg.Go(func() {
			f, err := d.Open(ctx, "/f", syscall.O_RDWR)
			if err != nil {
				errs <- err
				return
			}
			defer f.Release(ctx)
			for r := range rounds {
				if w == 1 && r%4 == 3 {
					var p []byte
					for c := range chunks {
						p = append(p, chunkOf(w, r, c)...)
					}
					if _, err := f.Write(ctx, p, 0); err != nil {
						errs <- fmt.Errorf("writer %d round %d, whole stripe: %w", w, r, err)
					}
					continue
				}
				for c := range chunks {
					if _, err := f.Write(ctx, chunkOf(w, r, c), int64(c)*Chunk); err != nil {
						errs <- fmt.Errorf("writer %d round %d chunk %d: %w", w, r, c, err)
					}
				}
			}
		})
	}
	stop := make(chan struct{})
	reads := make(chan int, 1)
	if reader != nil {
		go func() { reads <- readWhole(t, reader, stripe, stop) }()
	} else {
		reads <- 0
	}
	wg.Wait()
	close(stop)
	t.Logf("%d reads of the stripe during the writes", <-reads)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, d := range layers {
		d.Idle()
	}
	rf, err := g.d.Open(ctx, "/f", syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Release(ctx)
	p := make([]byte, stripe)
	if n, err := rf.Read(ctx, p, 0); err != nil || n != len(p) {
		t.Fatalf("read: %d, %v", n, err)
	}
	for c := range chunks {
		w, r, cc, ok := whoWrote(p[c*Chunk : (c+1)*Chunk])
		if !ok || cc != c || r != rounds-1 {
			t.Errorf("chunk %d: writer %d round %d chunk %d (whole: %v), want one writer's last round", c, w, r, cc, ok)
		}
	}
	if degraded {
		return // brick 0 missed the writes: heal's business
	}
	sc, corrupt := fetchStripe(ctx, g.d.g, openAll(t, g), g.d.all(), 0)
	if corrupt != 0 {
		t.Fatalf("corrupt chunks on %b", corrupt)
	}
	for i := range sc.headers {
		if sc.headers[i].Version != sc.headers[0].Version {
			t.Errorf("brick %d has version %x, brick 0 %x", i, sc.headers[i].Version, sc.headers[0].Version)
		}
	}
	h, err := heal.New([]heal.Set{g.children}, heal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if info, err := h.Info(ctx); err != nil || info.Pending() != 0 {
		t.Fatalf("heal info after the writers closed: %+v, %v", info, err)
	}
}

// readWhole reads the first stripe of /f through d until stop is closed,
// and fails the test unless every read succeeds with every chunk whole:
// zeros, or one of chunkOf's. It returns the number of reads.
func readWhole(t *testing.T, d *Disperse, stripe int64, stop <-chan struct{}) int {
	ctx := context.Background()
	f, err := d.Open(ctx, "/f", syscall.O_RDONLY)
	if err != nil {
		t.Error(err)
		return 0
	}
	defer f.Release(ctx)
	zero := make([]byte, Chunk)
	p := make([]byte, stripe)
	for n := 0; ; n++ {
		select {
		case <-stop:
			return n
		default:
		}
		if got, err := f.Read(ctx, p, 0); err != nil || got != len(p) {
			t.Errorf("read during the writes: %d, %v", got, err)
			return n
		}
		for c := int64(0); c < stripe; c += Chunk {
			if _, _, _, ok := whoWrote(p[c : c+Chunk]); !ok && !bytes.Equal(p[c:c+Chunk], zero) {
				t.Errorf("read during the writes: chunk at %d is not whole", c)
				return n
			}
		}
	}
}

// A client that dies holding the lock, with a write of a stripe half done
// (on 3 bricks of 6), releases the lock with its connections: a writer of
// another client waiting for it goes on; the file keeps the Dirty mark
// (the other writer sees it and leaves it), and heal repairs the stripe.
func TestWriterDiesHoldingLock(t *testing.T) {
	g := newRig(t, 6, 2)
	ctx := g.ctx
	stripe := g.d.g.Stripe()
	old := make([]byte, 2*stripe)
	rand.New(rand.NewSource(1)).Read(old)
	g.writeFile("/f", old)

	// The dying client takes the lock as a writer does and writes stripe
	// 1 anew to bricks 0-2 only.
	dying := g.newClient()
	files := make([]layer.File, 6)
	var err error
	for i, pc := range dying.conns {
		if files[i], err = pc.Open(ctx, "/f", syscall.O_RDWR); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lockFiles(ctx, files, g.d.all(), lockOwners.Add(1), g.d.g.K); err != nil {
		t.Fatal(err)
	}
	nw := make([]byte, stripe)
	rand.New(rand.NewSource(2)).Read(nw)
	bufs, err := g.d.records([]StripeWrite{{Stripe: 1, Data: nw}}, int64(len(old)))
	if err != nil {
		t.Fatal(err)
	}
	wctx := layer.WithTxn(ctx, layer.Txn{Pending: layer.Dirty, SetSize: true, Size: uint64(len(old))})
	for i := range 3 {
		if _, err := files[i].Write(wctx, bufs[i], Record); err != nil {
			t.Fatal(err)
		}
	}

	// The other client's write of that stripe waits for the lock...
	wf, err := g.d.Open(ctx, "/f", syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	mine := chunkOf(1, 0, 0)
	done := make(chan error, 1)
	go func() {
		_, err := wf.Write(ctx, mine, stripe)
		done <- err
	}()
	// ... (the dying client still holds it on every brick) ...
	probe := wholeFile
	if got, err := files[0].Getlk(ctx, lockOwners.Add(1), probe); err != nil || got.Type != syscall.F_WRLCK {
		t.Fatalf("the dying client's lock: %+v, %v", got, err)
	}
	// ... until the dying client's connections close.
	dying.die()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("write after the holder died: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("write still waiting 20s after the lock holder died")
	}
	wf.Release(ctx)
	g.d.Idle()

	h, err := heal.New([]heal.Set{g.children}, heal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if info, err := h.Info(ctx); err != nil || info.Pending() == 0 {
		t.Fatalf("heal info after a writer died mid-write: %+v, %v; want the file listed", info, err)
	}
	dh, err := NewDataHealer([][]replicate.Child{g.children}, 2)
	if err != nil {
		t.Fatal(err)
	}
	dh.Quiet = 0
	if h, err = heal.New([]heal.Set{g.children}, heal.Options{Data: dh}); err != nil {
		t.Fatal(err)
	}
	if err := h.Heal(ctx, 0, "/f"); err != nil {
		t.Fatal(err)
	}
	if info, err := h.Info(ctx); err != nil || info.Pending() != 0 {
		t.Fatalf("after heal: %+v, %v", info, err)
	}
	// The survivor's chunk is there; the other chunks of the stripe are
	// each old or new, whole.
	rf, err := g.d.Open(ctx, "/f", syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Release(ctx)
	p := make([]byte, len(old))
	if n, err := rf.Read(ctx, p, 0); err != nil || n != len(p) {
		t.Fatalf("read: %d, %v", n, err)
	}
	if !bytes.Equal(p[:stripe], old[:stripe]) || !bytes.Equal(p[stripe:stripe+Chunk], mine) {
		t.Fatal("stripe 0 changed, or the surviving writer's chunk is missing")
	}
	for c := stripe + Chunk; c < 2*stripe; c += Chunk {
		if !bytes.Equal(p[c:c+Chunk], old[c:c+Chunk]) && !bytes.Equal(p[c:c+Chunk], nw[c-stripe:c-stripe+Chunk]) {
			t.Fatalf("chunk at %d is neither old nor new", c)
		}
	}
}

// A writer that keeps writing does not keep the lock from a client that
// waits for it where the holder's 10 ms look does not go: one cut off from
// the holder's lowest brick waits on the next one, which the holder asks
// every lockLookAll. It gets its turn within a few of those.
func TestWaiterOnAnotherBrickGetsItsTurn(t *testing.T) {
	g := newRig(t, 6, 2)
	ctx := g.ctx
	stripe := g.d.g.Stripe()
	g.writeFile("/f", make([]byte, 2*stripe))

	hf, err := g.d.Open(ctx, "/f", syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Release(ctx)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stop)
	wg.Go(func() { // the holder: a write every millisecond, never idle
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if _, err := hf.Write(ctx, []byte{byte(i)}, 0); err != nil {
				t.Errorf("holder's write: %v", err)
				return
			}
		}
	})
	for !holds(hf) {
		time.Sleep(time.Millisecond)
	}

	other := g.newClient()
	other.conns[0].Close() // brick 0 is down for it
	wf, err := other.d.Open(ctx, "/f", syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer wf.Release(ctx)
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := wf.Write(wctx, []byte("waiter"), stripe); err != nil {
		t.Fatalf("waiter's write: %v", err)
	}
	if waited := time.Since(start); waited > 4*lockLookAll {
		t.Fatalf("the waiter waited %v for the lock", waited)
	}
}

// holds says whether f holds the writers' lock.
func holds(f layer.File) bool {
	h := &f.(*file).hold
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held != 0
}
