package e2e

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// modelNode is what the model says one path is.
type modelNode struct {
	dir  bool
	link string
	data []byte
	perm os.FileMode
}

// fsModel is the in-memory file system the mount must equal.
type fsModel map[string]*modelNode

func (m fsModel) children(dir string) []string {
	var out []string
	for p := range m {
		if filepath.Dir(p) == dir && p != dir {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func (m fsModel) pick(r *rand.Rand, want func(*modelNode) bool) string {
	var cands []string
	for p, n := range m {
		if p != "." && want(n) {
			cands = append(cands, p)
		}
	}
	if len(cands) == 0 {
		return ""
	}
	sort.Strings(cands)
	return cands[r.Intn(len(cands))]
}

func isFile(n *modelNode) bool { return !n.dir && n.link == "" }
func isDir(n *modelNode) bool  { return n.dir }
func anyNode(*modelNode) bool  { return true }

// Random operations on a replica-3 mount while random bricks are killed
// with SIGKILL and restarted (one at a time, and only once the previous one
// is healed, so that every file keeps a quorum of current copies; the
// operations go on while it heals); after the final heal the mount equals
// the model and the bricks are identical. MORTAR_MODEL_SEED replays a run; MORTAR_FAULT_FULL runs
// longer.
func TestReplicaRandomizedModel(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("MORTAR_MODEL_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	t.Logf("seed %d (MORTAR_MODEL_SEED=%d replays it)", seed, seed)
	r := rand.New(rand.NewSource(seed))
	steps := 300
	if os.Getenv("MORTAR_FAULT_FULL") != "" {
		steps = 3000
	}
	n := startNode(t)
	bricks := n.replicaVolume("mod", 3, 3, false)
	mnt := n.mount("mod")
	model := fsModel{".": {dir: true, perm: 0o755}}
	down := -1
	for step := 0; step < steps; step++ {
		if step%40 == 20 {
			if down >= 0 {
				n.restartBricks("mod")
				n.step("bricks restarted")
				down = -1
			} else {
				// A second failure before the first is healed would leave
				// files with one current copy: no quorum (EROFS) for them.
				n.waitHealed("mod", bricks, 3, false, healWait())
				down = r.Intn(3)
				n.killBrick("mod", bricks[down])
				n.step("brick %d killed", down+1)
			}
		}
		op := randomOp(t, r, model, mnt, func(p string) string {
			return marksOf(bricks, p) + n.mountLogs() + "\n(logs kept in " + n.keepLogs("mod") + ")"
		})
		if op == "" {
			continue
		}
		n.step("step %d: %s", step, op)
		if os.Getenv("MORTAR_MODEL_TRACE") != "" {
			t.Logf("step %d: %s (brick down: %d)", step, op, down)
		}
	}
	if down >= 0 {
		n.restartBricks("mod")
	}
	n.waitHealed("mod", bricks, 3, false, healWait())
	if d := diffMount(mnt, model); d != "" {
		t.Fatalf("seed %d: mount differs from the model: %s", seed, d)
	}
}

// randomOp does one random operation on the mount and the model, failing
// the test if the mount disagrees with the model about its outcome.
func randomOp(t *testing.T, r *rand.Rand, m fsModel, mnt string, logs func(path string) string) string {
	t.Helper()
	abs := func(p string) string { return filepath.Join(mnt, p) }
	newName := func() string {
		dir := m.pick(r, isDir)
		if dir == "" {
			dir = "."
		}
		if r.Intn(3) == 0 {
			dir = "."
		}
		return filepath.Join(dir, fmt.Sprintf("n%d", r.Intn(40)))
	}
	check := func(op string, err error) string {
		if err != nil {
			f := strings.Fields(op)
			t.Fatalf("%s: %v\n%s", op, err, logs(f[len(f)-1]))
		}
		return op
	}
	switch k := r.Intn(10); {
	case k < 3: // write a new or existing file
		p := newName()
		if n, ok := m[p]; ok && !isFile(n) {
			return ""
		}
		data := bytes.Repeat([]byte{byte('a' + r.Intn(26))}, r.Intn(200000))
		perm := os.FileMode(0o644)
		if old, ok := m[p]; ok {
			perm = old.perm // WriteFile keeps an existing file's mode
		}
		m[p] = &modelNode{data: data, perm: perm}
		return check("write "+p, os.WriteFile(abs(p), data, 0o644))
	case k == 3: // append
		p := m.pick(r, isFile)
		if p == "" {
			return ""
		}
		extra := []byte(strconv.Itoa(r.Int()))
		m[p].data = append(m[p].data, extra...)
		f, err := os.OpenFile(abs(p), os.O_WRONLY|os.O_APPEND, 0)
		if err == nil {
			_, err = f.Write(extra)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		return check("append "+p, err)
	case k == 4: // mkdir
		p := newName()
		if _, ok := m[p]; ok {
			return ""
		}
		m[p] = &modelNode{dir: true, perm: 0o755}
		return check("mkdir "+p, os.Mkdir(abs(p), 0o755))
	case k == 5: // rename (not a directory into itself)
		from, to := m.pick(r, anyNode), newName()
		if from == "" || from == to || strings.HasPrefix(to+"/", from+"/") {
			return ""
		}
		if dst, ok := m[to]; ok && (dst.dir || m[from].dir) {
			return ""
		}
		for _, p := range sortedKeys(m) {
			if p == from || strings.HasPrefix(p, from+"/") {
				n := m[p]
				delete(m, p)
				m[to+strings.TrimPrefix(p, from)] = n
			}
		}
		return check("rename "+from+" "+to, os.Rename(abs(from), abs(to)))
	case k == 6: // remove a file or a whole tree
		p := m.pick(r, anyNode)
		if p == "" {
			return ""
		}
		for _, q := range sortedKeys(m) {
			if q == p || strings.HasPrefix(q, p+"/") {
				delete(m, q)
			}
		}
		return check("rm -r "+p, os.RemoveAll(abs(p)))
	case k == 7: // chmod
		p := m.pick(r, func(n *modelNode) bool { return n.link == "" })
		if p == "" {
			return ""
		}
		perm := os.FileMode(0o600 + r.Intn(0o100))
		if m[p].dir {
			perm |= 0o700
		}
		m[p].perm = perm
		return check("chmod "+p, os.Chmod(abs(p), perm))
	case k == 8: // symlink
		p := newName()
		if _, ok := m[p]; ok {
			return ""
		}
		target := fmt.Sprintf("t%d", r.Intn(100))
		m[p] = &modelNode{link: target}
		return check("symlink "+p, os.Symlink(target, abs(p)))
	default: // truncate
		p := m.pick(r, isFile)
		if p == "" {
			return ""
		}
		size := r.Intn(len(m[p].data) + 1)
		m[p].data = m[p].data[:size]
		return check("truncate "+p, os.Truncate(abs(p), int64(size)))
	}
}

func sortedKeys(m fsModel) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// diffMount compares the mount with the model; "" when equal.
func diffMount(mnt string, m fsModel) string {
	seen := map[string]bool{}
	var diffs []string
	filepath.WalkDir(mnt, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			diffs = append(diffs, err.Error())
			return nil
		}
		rel, _ := filepath.Rel(mnt, p)
		seen[rel] = true
		want, ok := m[rel]
		if !ok {
			diffs = append(diffs, "extra "+rel)
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			diffs = append(diffs, err.Error())
			return nil
		}
		switch {
		case want.dir:
			if !fi.IsDir() {
				diffs = append(diffs, rel+": not a directory")
			}
		case want.link != "":
			if got, _ := os.Readlink(p); got != want.link {
				diffs = append(diffs, fmt.Sprintf("%s: link %q, want %q", rel, got, want.link))
			}
			return nil
		default:
			got, err := os.ReadFile(p)
			if err != nil || !bytes.Equal(got, want.data) {
				diffs = append(diffs, fmt.Sprintf("%s: %d bytes (%v), want %d", rel, len(got), err, len(want.data)))
			}
		}
		if rel != "." && fi.Mode().Perm() != want.perm {
			diffs = append(diffs, fmt.Sprintf("%s: mode %o, want %o", rel, fi.Mode().Perm(), want.perm))
		}
		return nil
	})
	for p := range m {
		if !seen[p] {
			diffs = append(diffs, "missing "+p)
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 8 {
		diffs = append(diffs[:8], fmt.Sprintf("... %d more", len(diffs)-8))
	}
	return strings.Join(diffs, "; ")
}

// marksOf shows the pending marks of path and its parent on every brick,
// for failure messages.
func marksOf(bricks []string, path string) string {
	var out strings.Builder
	for _, p := range []string{path, filepath.Dir(path)} {
		for _, b := range bricks {
			cmd := exec.Command("getfattr", "-d", "-m", "trusted.mortar", "-e", "hex", filepath.Join(b, p))
			o, _ := cmd.CombinedOutput()
			fmt.Fprintf(&out, "%s", o)
		}
	}
	for _, b := range bricks { // what each brick holds below path, and its marks there
		o, _ := exec.Command("find", filepath.Join(b, path), "-maxdepth", "3", "-printf", "%P %y %s %i\n").CombinedOutput()
		fmt.Fprintf(&out, "== %s below %s:\n%s", b, path, o)
		o, _ = exec.Command("getfattr", "-R", "-d", "-m", "trusted.mortar.pending", "-e", "hex", filepath.Join(b, path)).CombinedOutput()
		fmt.Fprintf(&out, "%s", o)
	}
	return out.String()
}

// healWait bounds each wait for heal (MORTAR_MODEL_HEAL_WAIT, a Go
// duration, shortens it when replaying a failure).
func healWait() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("MORTAR_MODEL_HEAL_WAIT")); err == nil {
		return d
	}
	return 2 * time.Minute
}
