package e2e

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// fsx runs random writes, truncations, reads, fsyncs and reopens of one
// file through a mount, checking every read against a model of the file's
// bytes (after fsx, the file system exerciser). steps operations; seed
// replays a run.
func fsx(t *testing.T, path string, seed int64, steps int) {
	t.Helper()
	r := rand.New(rand.NewSource(seed))
	var model []byte
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { f.Close() }()
	fail := func(step int, what string, err error) {
		t.Helper()
		t.Fatalf("seed %d step %d: %s: %v", seed, step, what, err)
	}
	for step := range steps {
		switch k := r.Intn(20); {
		case k < 8: // write
			off := r.Int63n(int64(len(model)) + 64<<10)
			data := make([]byte, 1+r.Intn(128<<10))
			r.Read(data)
			if _, err := f.WriteAt(data, off); err != nil {
				fail(step, fmt.Sprintf("write %d at %d", len(data), off), err)
			}
			if end := off + int64(len(data)); end > int64(len(model)) {
				model = append(model, make([]byte, end-int64(len(model)))...)
			}
			copy(model[off:], data)
		case k < 10: // truncate
			size := r.Int63n(2*int64(len(model)) + 1)
			if err := f.Truncate(size); err != nil {
				fail(step, "truncate to "+strconv.FormatInt(size, 10), err)
			}
			if size < int64(len(model)) {
				model = model[:size]
			} else {
				model = append(model, make([]byte, size-int64(len(model)))...)
			}
		case k < 17: // read, through the file or (a third of them) another open of it
			off := r.Int63n(int64(len(model)) + 1)
			buf := make([]byte, r.Intn(256<<10))
			n, err := fsxRead(f, path, buf, off, k < 13)
			want := model[off:min(off+int64(len(buf)), int64(len(model)))]
			if n != len(want) || (err != nil && n == len(buf)) || !bytes.Equal(buf[:n], want) {
				fail(step, fmt.Sprintf("read %d at %d of %d bytes: got %d bytes, differ: %v", len(buf), off, len(model), n, !bytes.Equal(buf[:n], want)), err)
			}
		case k == 17:
			if err := f.Sync(); err != nil {
				fail(step, "fsync", err)
			}
		default: // reopen: close flushes what write-behind holds
			if err := f.Close(); err != nil {
				fail(step, "close", err)
			}
			if f, err = os.OpenFile(path, os.O_RDWR, 0); err != nil {
				fail(step, "reopen", err)
			}
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, model) {
		t.Fatalf("seed %d: the whole file (%d bytes, %v) differs from the model (%d bytes)", seed, len(got), err, len(model))
	}
}

// fsxRead reads at off through f, or through another open of path.
func fsxRead(f *os.File, path string, buf []byte, off int64, same bool) (int, error) {
	if same {
		return f.ReadAt(buf, off)
	}
	g, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer g.Close()
	return g.ReadAt(buf, off)
}

// The fsx-style exerciser through a mount, with every client cache on
// (cache invalidation too), with the defaults, and with every cache off.
func TestFsxThroughMount(t *testing.T) {
	n := startNode(t)
	seed := time.Now().UnixNano()
	if s := os.Getenv("MORTAR_FSX_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	t.Logf("seed %d (MORTAR_FSX_SEED replays it)", seed)
	for _, c := range []struct {
		name     string
		keywords []string
		opts     []string
	}{
		{"replica-3-every-cache", []string{"replica", "3"}, []string{"features.cache-invalidation", "on"}},
		{"distribute-defaults", nil, nil},
		{"disperse-caches-off", []string{"disperse", "3", "redundancy", "1"}, []string{"performance.client-cache", "off"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n.createVolume("fsx-"+c.name, 3, c.keywords, c.opts)
			mnt := n.mount("fsx-" + c.name)
			fsx(t, filepath.Join(mnt, "f"), seed, 1500)
		})
	}
}
