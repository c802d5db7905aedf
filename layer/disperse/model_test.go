package disperse

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand"
	"os"
	"strconv"
	"syscall"
	"testing"

	"github.com/mortarfs/mortar/heal"
	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/replicate"
)

// modelSeed is MORTAR_DISPERSE_SEED, or a fixed seed.
func modelSeed(t *testing.T, def int64) int64 {
	if s := os.Getenv("MORTAR_DISPERSE_SEED"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return def
}

// modelSteps is MORTAR_DISPERSE_STEPS, or def.
func modelSteps(def int) int {
	if n, err := strconv.Atoi(os.Getenv("MORTAR_DISPERSE_STEPS")); err == nil && n > 0 {
		return n
	}
	return def
}

// model runs random writes, truncates and reads on one file of a disperse
// set against a byte slice, killing and reviving bricks (never more than M
// down), healing now and then; reads must always equal the model, and
// after each heal every brick must hold the current chunk of every stripe,
// which a read with M *other* bricks down proves.
type model struct {
	t    *testing.T
	r    *rand.Rand
	g    *rig
	h    *heal.Healer
	f    layer.File
	want []byte
	down replicate.Mask
	// stale are the bricks that missed a change since the last heal: with
	// the bricks down, never more than M (beyond that, EIO is right).
	stale replicate.Mask
	log   []string
}

func (m *model) logf(format string, args ...any) {
	m.log = append(m.log, fmt.Sprintf(format, args...))
	if len(m.log) > 40 {
		m.log = m.log[1:]
	}
}

func (m *model) fatalf(format string, args ...any) {
	m.t.Helper()
	for _, l := range m.log {
		m.t.Log(l)
	}
	m.t.Fatalf(format, args...)
}

func (m *model) reopen() {
	if m.f != nil {
		m.f.Release(m.g.ctx)
	}
	f, err := m.g.d.Open(m.g.ctx, "/f", syscall.O_RDWR)
	if err != nil {
		m.fatalf("reopen: %v", err)
	}
	m.f = f
}

// span is a random length: often small, sometimes several stripes.
func (m *model) span() int64 {
	ss := m.g.d.g.Stripe()
	switch m.r.Intn(4) {
	case 0:
		return m.r.Int63n(100) + 1
	case 1:
		return m.r.Int63n(8192) + 1
	case 2:
		return m.r.Int63n(ss) + 1
	}
	return m.r.Int63n(3*ss) + 1
}

func (m *model) write() {
	off := m.r.Int63n(int64(len(m.want)) + m.g.d.g.Stripe())
	p := make([]byte, m.span())
	m.r.Read(p)
	m.logf("write %d bytes at %d (size %d, down %b)", len(p), off, len(m.want), m.down)
	m.stale |= m.down
	n, err := m.f.Write(m.g.ctx, p, off)
	if err != nil || n != len(p) {
		m.fatalf("write %d at %d: %d, %v", len(p), off, n, err)
	}
	if end := off + int64(len(p)); end > int64(len(m.want)) {
		m.want = append(m.want, make([]byte, end-int64(len(m.want)))...)
	}
	copy(m.want[off:], p)
}

func (m *model) truncate() {
	size := m.r.Int63n(int64(len(m.want)) + m.g.d.g.Stripe() + 1)
	m.logf("truncate to %d (size %d, down %b)", size, len(m.want), m.down)
	m.stale |= m.down
	if _, err := m.f.Setattr(m.g.ctx, layer.SetattrIn{Valid: layer.SetSize, Size: uint64(size)}); err != nil {
		m.fatalf("truncate to %d: %v", size, err)
	}
	if size < int64(len(m.want)) {
		m.want = m.want[:size]
	} else {
		m.want = append(m.want, make([]byte, size-int64(len(m.want)))...)
	}
}

func (m *model) read(what string) {
	m.t.Helper()
	off := int64(0)
	n := int64(len(m.want)) + 10
	if m.r.Intn(2) == 0 && len(m.want) > 0 {
		off = m.r.Int63n(int64(len(m.want)))
		n = m.span()
	}
	p := make([]byte, n)
	got, err := m.f.Read(m.g.ctx, p, off)
	if err != nil {
		m.fatalf("%s: read %d at %d (down %b): %v", what, n, off, m.down, err)
	}
	end := min(off+n, int64(len(m.want)))
	if want := m.want[off:end]; !bytes.Equal(p[:got], want) {
		m.fatalf("%s: read %d at %d (down %b): %d bytes differ from the model (%d wanted)", what, n, off, m.down, got, len(want))
	}
	a, err := m.f.Getattr(m.g.ctx)
	if err != nil || a.Size != uint64(len(m.want)) {
		m.fatalf("%s: getattr size %d, %v; want %d", what, a.Size, err, len(m.want))
	}
}

func (m *model) kill() {
	i := m.r.Intn(m.g.d.g.N())
	if m.down.Has(i) || (m.down|m.stale|replicate.Bit(i)).Count() > m.g.d.g.M {
		return
	}
	m.logf("kill brick %d", i)
	m.g.kill(i)
	m.down |= replicate.Bit(i)
}

func (m *model) reviveAll() {
	for i := range m.g.bricks {
		if m.down.Has(i) {
			m.logf("revive brick %d", i)
			m.g.revive(i)
		}
	}
	m.down = 0
}

// healAndProve revives every brick, heals the file, then reads it whole
// with each group of M bricks down in turn.
func (m *model) healAndProve() {
	m.reviveAll()
	m.f.Release(m.g.ctx)
	m.f = nil
	m.g.d.Idle()
	// A healed sink's own marks are settled by the next pass, as the
	// daemon's next scan does. An index entry left without a mark (a
	// clear that raced another) is dropped by the daemon's scan: only
	// marks count here.
	for pass := 1; ; pass++ {
		if err := m.h.Heal(m.g.ctx, 0, "/f"); err != nil {
			m.fatalf("heal: %v", err)
		}
		marked := ""
		for i, b := range m.g.bricks {
			es, err := b.Store.HealIndex(m.g.ctx, layer.Gfid{}, 10)
			for _, e := range es {
				if e.Pending != 0 || err != nil {
					marked += fmt.Sprintf(" brick %d: %+v %v;", i, e, err)
				}
			}
		}
		if marked == "" {
			break
		}
		if pass == 3 {
			m.fatalf("after %d heals, marks left:%s", pass, marked)
		}
	}
	m.stale = 0
	n := m.g.d.g.N()
	for first := 0; first < n; first += m.g.d.g.M {
		for i := first; i < min(first+m.g.d.g.M, n); i++ {
			m.g.kill(i)
			m.down |= replicate.Bit(i)
		}
		m.reopen()
		m.logf("prove heal with %b down", m.down)
		m.read("after heal")
		m.reviveAll()
		m.f.Release(m.g.ctx)
		m.f = nil
	}
	m.reopen()
}

func runModel(t *testing.T, n, red int, seed int64, steps int) {
	g := newRig(t, n, red)
	dh, err := NewDataHealer([][]replicate.Child{g.children}, red)
	if err != nil {
		t.Fatal(err)
	}
	dh.Quiet = 0 // no client is writing when the test heals
	m := &model{}
	h, err := heal.New([]heal.Set{g.children}, heal.Options{Data: dh, Logger: slog.New(slog.NewTextHandler(logTo{m}, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	*m = model{t: t, r: rand.New(rand.NewSource(seed)), g: g, h: h}
	f, _, err := g.d.Create(context.Background(), "/f", layer.CreateIn{Flags: syscall.O_RDWR, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	m.f = f
	t.Logf("seed %d (MORTAR_DISPERSE_SEED replays it)", seed)
	for step := 0; step < steps; step++ {
		switch k := m.r.Intn(100); {
		case k < 40:
			m.write()
		case k < 50:
			m.truncate()
		case k < 75:
			m.read("read")
		case k < 82:
			m.kill()
		case k < 86:
			m.reviveAll()
		case k < 92:
			m.reopen()
		default:
			m.healAndProve()
		}
	}
	m.healAndProve()
	m.f.Release(g.ctx)
}

func TestModel42(t *testing.T) {
	runModel(t, 6, 2, modelSeed(t, 42), modelSteps(200))
}

func TestModel21(t *testing.T) {
	runModel(t, 3, 1, modelSeed(t, 21), modelSteps(150))
}

// logTo keeps the healer's log lines with the model's last steps.
type logTo struct{ m *model }

func (l logTo) Write(p []byte) (int, error) {
	l.m.logf("heal: %s", bytes.TrimSpace(p))
	return len(p), nil
}
