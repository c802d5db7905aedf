package e2e

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mortarfs/mortar/layer/disperse"
)

// Two mounts of one 4+2 volume write the four 64 KiB chunks of the first
// stripe of one 1 MiB file at the same time, each chunk with its own
// open(O_DIRECT), pwrite and close (as `dd oflag=direct conv=notrunc`
// does), round after round. The disperse layer orders the two clients
// with a lock on the bricks: every write succeeds; afterwards, through a
// third mount, the file reads without error, each chunk is one writer's
// last round whole, the rest of the file is untouched, and nothing is
// left to heal. MORTAR_FAULT_FULL (scripts/fault) runs 200 rounds.
func TestDisperseTwoWritersOneStripe(t *testing.T) {
	rounds := 8
	if os.Getenv("MORTAR_FAULT_FULL") != "" {
		rounds = 200
	}
	n := startNode(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(n.mountLogs())
		}
	})
	bricks := n.disperseVolume("tw", 6, 2, 6)
	mnts := []string{n.mount("tw", "attr-timeout=0", "entry-timeout=0"), n.mount("tw", "attr-timeout=0", "entry-timeout=0")}
	const size = 1 << 20
	initial := randomFile(t, mnts[0], "f", size, 21)
	const chunks = 4 // of the first stripe
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 2*rounds*chunks)
	for w, mnt := range mnts {
		wg.Go(func() {
			buf, err := syscall.Mmap(-1, 0, disperse.Chunk, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
			if err != nil {
				errs <- err
				return
			}
			defer syscall.Munmap(buf) // page-aligned, as O_DIRECT wants
			for r := range rounds {
				for c := range chunks {
					copy(buf, writerChunk(w, r, c))
					if err := pwriteDirect(filepath.Join(mnt, "f"), buf, int64(c)*disperse.Chunk); err != nil {
						errs <- fmt.Errorf("writer %d round %d chunk %d: %w", w, r, c, err)
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if failed++; failed <= 10 {
			t.Error(err)
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d writes failed\n%s", failed, 2*rounds*chunks, n.mountLogs())
	}
	t.Logf("%d writes of 64 KiB by two clients in %v", 2*rounds*chunks, time.Since(start).Round(time.Millisecond))

	got, err := os.ReadFile(filepath.Join(n.mount("tw", "attr-timeout=0", "entry-timeout=0"), "f"))
	if err != nil {
		t.Fatalf("read through a third mount: %v", err)
	}
	if len(got) != size {
		t.Fatalf("file is %d bytes, want %d", len(got), size)
	}
	for c := range chunks {
		have := got[c*disperse.Chunk : (c+1)*disperse.Chunk]
		if !bytes.Equal(have, writerChunk(0, rounds-1, c)) && !bytes.Equal(have, writerChunk(1, rounds-1, c)) {
			w, r, cc := binary.LittleEndian.Uint64(have), binary.LittleEndian.Uint64(have[8:]), binary.LittleEndian.Uint64(have[16:])
			t.Errorf("chunk %d is not one writer's last round whole (starts as writer %d round %d chunk %d)", c, w, r, cc)
		}
	}
	if rest := chunks * disperse.Chunk; !bytes.Equal(got[rest:], initial[rest:]) {
		t.Errorf("the rest of the file changed, first at %d", rest+firstDiff(got[rest:], initial[rest:]))
	}
	n.waitDisperseHealed("tw", bricks, 6, 30*time.Second)
}

// writerChunk is what writer w writes to chunk c in round r: its first 24
// bytes say who, the rest follows from them.
func writerChunk(w, r, c int) []byte {
	p := make([]byte, disperse.Chunk)
	binary.LittleEndian.PutUint64(p, uint64(w))
	binary.LittleEndian.PutUint64(p[8:], uint64(r))
	binary.LittleEndian.PutUint64(p[16:], uint64(c))
	rand.New(rand.NewSource(int64(w<<40 | r<<8 | c))).Read(p[24:])
	return p
}

// pwriteDirect opens p with O_DIRECT, writes buf (aligned) at off, and
// closes it.
func pwriteDirect(p string, buf []byte, off int64) error {
	fd, err := syscall.Open(p, syscall.O_WRONLY|syscall.O_DIRECT, 0)
	if err != nil {
		return err
	}
	n, err := syscall.Pwrite(fd, buf, off)
	if cerr := syscall.Close(fd); err == nil {
		err = cerr
	}
	if err == nil && n != len(buf) {
		err = fmt.Errorf("short write: %d of %d", n, len(buf))
	}
	return err
}
