package bench

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

func metadata() Experiment {
	return Experiment{
		Name:  "metadata",
		Title: "Copying, listing, finding and removing a tree of small files; untarring the Go distribution; create / stat / delete loops",
		Paper: "no paper measured this; it is what the papers' users complain about (small files: tens to " +
			"hundreds of ops/s where the disk does thousands): `cp -a` of a tree of a few thousand files, " +
			"`ls -lR`, `find`, `rm -rf`, `tar xf` of the Go distribution (about 15 000 files) and `rm -rf` " +
			"of it (seconds), and create / stat / delete loops (ops/s).",
		Run: runMetadata,
	}
}

// metadataSizes: directories and files per directory of the tree, and
// the files of the create/stat/delete loops.
func metadataSizes(quick bool) (dirs, perDir, ops int) {
	if quick {
		return 25, 20, 200
	}
	return 150, 20, 1000
}

func runMetadata(ctx context.Context, r *Runner) error {
	dirs, perDir, ops := metadataSizes(r.Quick)
	src := filepath.Join(r.Work, "metadata-src")
	entries, err := makeTree(src, dirs, perDir)
	if err != nil {
		return fmt.Errorf("making the source tree: %w", err)
	}
	defer os.RemoveAll(src)
	r.Note("", "", "tree: %d entries (%d directories of %d files of 0-8 KiB and a symlink each) on the local disk; "+
		"caches dropped before each timed command; `cp -a SRC tree`, `ls -lR tree`, `find tree`, `rm -rf tree`", entries, dirs, perDir)
	tarball, err := makeUntarTree(ctx, r)
	if err != nil {
		return fmt.Errorf("making the tree to untar: %w", err)
	}
	defer os.Remove(tarball)
	r.Note("", "", "loops from Go on %d files: create (open O_CREAT|O_EXCL, close), stat (after dropping caches), delete (unlink)", ops)
	layout := r.layouts(Layout{Kind: "distribute", Bricks: 3})[0]
	return r.Each(ctx, layout, SetupOptions{}, func(ctx context.Context, t Target, m Mount) error {
		rec := func(rep int, metric, unit string, v float64) {
			r.Record(Result{Target: t.Name(), Layout: labelFor(t.Name(), layout), Metric: metric, Value: v, Unit: unit, Repetition: rep})
			r.Progress("  %s #%d: %s %.3g %s", t.Name(), rep, metric, v, unit)
		}
		for rep := 1; rep <= r.Reps; rep++ {
			tree := "tree" + strconv.Itoa(rep)
			steps := []struct{ metric, script string }{
				{"cp -a", fmt.Sprintf("cp -a %s %s", src, tree)},
				{"ls -lR", "ls -lR " + tree + " > /dev/null"},
				{"find", "find " + tree + " > /dev/null"},
				{"rm -rf", "rm -rf " + tree},
				{"untar", fmt.Sprintf("mkdir untar%d && tar xf %s -C untar%d", rep, tarball, rep)},
				{"rm -rf untarred", fmt.Sprintf("rm -rf untar%d", rep)},
			}
			for _, s := range steps {
				if err := DropCaches(ctx); err != nil {
					return err
				}
				d, err := timeShell(ctx, m.Dir(), s.script)
				if err != nil {
					return err
				}
				rec(rep, s.metric, "s", d.Seconds())
			}
			rates, err := metadataOps(ctx, filepath.Join(m.Dir(), "ops"+strconv.Itoa(rep)), ops)
			if err != nil {
				return err
			}
			for _, name := range []string{"create", "stat", "delete"} {
				rec(rep, name, "ops/s", rates[name])
			}
		}
		return nil
	})
}

// makeTree makes dirs directories of perDir files (0-8 KiB, fixed seed)
// and one symlink each under dir, and returns the number of entries.
func makeTree(dir string, dirs, perDir int) (int, error) {
	os.RemoveAll(dir)
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 8192)
	for i := range buf {
		buf[i] = byte('a' + i%26)
	}
	n := 1
	for d := 0; d < dirs; d++ {
		sub := filepath.Join(dir, fmt.Sprintf("d%02d", d%10), fmt.Sprintf("dir%03d", d))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return 0, err
		}
		n++
		for f := 0; f < perDir; f++ {
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("file%02d.txt", f)), buf[:rng.IntN(len(buf))], 0o644); err != nil {
				return 0, err
			}
		}
		if err := os.Symlink("file00.txt", filepath.Join(sub, "link")); err != nil {
			return 0, err
		}
		n += perDir + 1
	}
	return n + min(dirs, 10), nil
}

// metadataOps creates n empty files in dir, stats them (after dropping
// caches) and deletes them; rates in operations per second.
func metadataOps(ctx context.Context, dir string, n int) (map[string]float64, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	name := func(i int) string { return filepath.Join(dir, "f"+strconv.Itoa(i)) }
	rates := map[string]float64{}
	start := time.Now()
	for i := 0; i < n; i++ {
		f, err := os.OpenFile(name(i), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, fmt.Errorf("create: %w", err)
		}
		f.Close()
	}
	rates["create"] = float64(n) / elapsedSince(start)
	if err := DropCaches(ctx); err != nil {
		return nil, err
	}
	start = time.Now()
	for i := 0; i < n; i++ {
		if _, err := os.Stat(name(i)); err != nil {
			return nil, fmt.Errorf("stat: %w", err)
		}
	}
	rates["stat"] = float64(n) / elapsedSince(start)
	start = time.Now()
	for i := 0; i < n; i++ {
		if err := os.Remove(name(i)); err != nil {
			return nil, fmt.Errorf("delete: %w", err)
		}
	}
	rates["delete"] = float64(n) / elapsedSince(start)
	return rates, ctx.Err()
}

// makeUntarTree tars the tree the untar step unpacks into the work
// directory (on the local disk) and notes what it holds: the Go
// distribution (with r.Quick only its src/net), or without a Go
// installation a synthetic tree of about 15 000 entries (quick: about
// 450). It returns the tar file's path.
func makeUntarTree(ctx context.Context, r *Runner) (string, error) {
	src, what := goTree(ctx, r.Quick)
	if src == "" {
		dirs := 680
		if r.Quick {
			dirs = 20
		}
		src = filepath.Join(r.Work, "metadata-untar-src")
		if _, err := makeTree(src, dirs, 20); err != nil {
			return "", err
		}
		defer os.RemoveAll(src)
		what = fmt.Sprintf("a synthetic tree (%d directories of 20 files of 0-8 KiB and a symlink each: "+
			"no Go installation was found)", dirs)
	}
	entries, size, err := treeSize(src)
	if err != nil {
		return "", err
	}
	tarball := filepath.Join(r.Work, "metadata-untar.tar")
	if _, err := execOut(ctx, "tar", "cf", tarball, "-C", filepath.Dir(src), filepath.Base(src)); err != nil {
		return "", err
	}
	r.Note("", "", "untar: %s, %d entries, %.1f MB in files, as one tar file on the local disk; caches dropped, "+
		"then `mkdir untarN && tar xf TAR -C untarN` in the target (as root: owners, modes and times restored), "+
		"caches dropped, then `rm -rf untarN`", what, entries, float64(size)/1e6)
	return tarball, nil
}

// goTree is the root of the Go distribution (`go env GOROOT`, else the
// one this binary was built with; with quick, its src/net) and a name for
// it, or "" when there is none.
func goTree(ctx context.Context, quick bool) (dir, what string) {
	root := runtime.GOROOT()
	if out, err := execOut(ctx, "go", "env", "GOROOT"); err == nil && strings.TrimSpace(out) != "" {
		root = strings.TrimSpace(out)
	}
	version := "Go"
	if b, err := os.ReadFile(filepath.Join(root, "VERSION")); err == nil {
		version, _, _ = strings.Cut(string(b), "\n")
	}
	dir, what = root, fmt.Sprintf("the %s distribution (%s)", version, root)
	if quick {
		dir = filepath.Join(root, "src", "net")
		what = fmt.Sprintf("src/net of the %s distribution (%s; --quick: a part only)", version, dir)
	}
	if st, err := os.Stat(dir); root == "" || err != nil || !st.IsDir() {
		return "", ""
	}
	return dir, what
}

// treeSize counts the entries under dir (dir included) and adds up the
// sizes of its regular files.
func treeSize(dir string) (entries int, bytes int64, err error) {
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		entries++
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			bytes += info.Size()
		}
		return nil
	})
	return entries, bytes, err
}
