package heal

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"syscall"

	"github.com/mortarfs/mortar/layer"
)

// Digest describes every inode of the tree at path on l, one line per
// volume path: type, permission bits, owner, gfid, user xattrs, and for a
// regular file its size and SHA-256, for a symlink its target, for a
// device its rdev, for a distribute pointer its linkto. Times and link
// counts are left out: replicas do not share them. Two replicas are in
// line when their digests are equal.
func Digest(ctx context.Context, l layer.Layer, path string) (map[string]string, error) {
	return digest(ctx, l, path, true)
}

// digest is Digest; without data it leaves out regular files' size and
// content (for arbiters).
func digest(ctx context.Context, l layer.Layer, path string, data bool) (map[string]string, error) {
	out := map[string]string{}
	a, err := l.Lookup(ctx, path)
	if err != nil {
		return nil, err
	}
	return out, digestTree(ctx, l, path, a, data, out)
}

func digestTree(ctx context.Context, l layer.Layer, path string, a layer.Attr, data bool, out map[string]string) error {
	line, err := describe(ctx, l, path, a, data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	out[path] = line
	if !a.IsDir() {
		return nil
	}
	ents, err := layer.ReadDirAll(ctx, l, path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, e := range ents {
		if err := digestTree(ctx, l, layer.Join(path, e.Name), e.Attr, data, out); err != nil {
			return err
		}
	}
	return nil
}

// describe is one inode's line of a digest.
func describe(ctx context.Context, l layer.Layer, path string, a layer.Attr, data bool) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %04o %d:%d gfid=%s", typeName(a.Mode), a.Mode&07777, a.Uid, a.Gid, a.Gfid)
	switch a.Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		if a.Linkto != "" {
			fmt.Fprintf(&b, " linkto=%s", a.Linkto)
		} else if data {
			sum, err := checksum(ctx, l, path)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, " size=%d sha256=%s", a.Size, sum)
		}
	case syscall.S_IFLNK:
		t, err := l.Readlink(ctx, path)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, " target=%q", t)
	case syscall.S_IFCHR, syscall.S_IFBLK:
		fmt.Fprintf(&b, " rdev=%d", a.Rdev)
	}
	if a.IsReg() || a.IsDir() {
		names, err := l.Listxattr(ctx, path)
		if err != nil {
			return "", err
		}
		slices.Sort(names)
		for _, n := range names {
			v, err := l.Getxattr(ctx, path, n)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, " %s=%x", n, v)
		}
	}
	return b.String(), nil
}

func typeName(mode uint32) string {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		return "dir"
	case syscall.S_IFREG:
		return "file"
	case syscall.S_IFLNK:
		return "symlink"
	case syscall.S_IFIFO:
		return "fifo"
	case syscall.S_IFCHR:
		return "chardev"
	case syscall.S_IFBLK:
		return "blockdev"
	case syscall.S_IFSOCK:
		return "socket"
	}
	return fmt.Sprintf("type%o", mode&syscall.S_IFMT)
}

// checksum is the SHA-256 of the regular file at path.
func checksum(ctx context.Context, l layer.Layer, path string) (string, error) {
	f, err := l.Open(ctx, path, syscall.O_RDONLY|syscall.O_NOATIME)
	if err != nil {
		return "", err
	}
	defer f.Release(ctx)
	bp := chunkPool.Get().(*[]byte)
	defer chunkPool.Put(bp)
	h := sha256.New()
	for off := int64(0); ; {
		n, err := f.Read(ctx, *bp, off)
		if err != nil {
			return "", err
		}
		h.Write((*bp)[:n])
		off += int64(n)
		if n < len(*bp) {
			return hex.EncodeToString(h.Sum(nil)), nil
		}
	}
}

// CompareSet checks that the reachable replicas of s hold the same tree
// under path: equal digests, without data on arbiters. The error lists
// the first differences.
func CompareSet(ctx context.Context, s Set, path string) error {
	// Replicas with data first: the reference holds data if any does.
	order := slices.Clone(s)
	slices.SortStableFunc(order, func(a, b Replica) int {
		return cmp.Compare(b2i(a.Arbiter), b2i(b.Arbiter))
	})
	var ref, refMeta map[string]string
	var refR Replica
	var diffs []string
	for _, r := range order {
		if r.Up != nil && !r.Up() {
			continue
		}
		d, err := digest(ctx, r.Layer, path, !r.Arbiter)
		if err != nil {
			return fmt.Errorf("%s: %w", r.Name, err)
		}
		want := ref
		switch {
		case ref == nil:
			ref, refR = d, r
			continue
		case r.Arbiter && !refR.Arbiter:
			if refMeta == nil {
				if refMeta, err = digest(ctx, refR.Layer, path, false); err != nil {
					return fmt.Errorf("%s: %w", refR.Name, err)
				}
			}
			want = refMeta
		}
		diffs = append(diffs, diffDigests(refR.Name, want, r.Name, d)...)
	}
	if len(diffs) == 0 {
		return nil
	}
	if len(diffs) > 20 {
		diffs = append(diffs[:20], fmt.Sprintf("... %d more", len(diffs)-20))
	}
	return fmt.Errorf("replicas differ:\n%s", strings.Join(diffs, "\n"))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// diffDigests lists the paths where two digests differ.
func diffDigests(an string, a map[string]string, bn string, b map[string]string) []string {
	var out []string
	for p, la := range a {
		if lb, ok := b[p]; !ok {
			out = append(out, fmt.Sprintf("%s: only on %s", p, an))
		} else if la != lb {
			out = append(out, fmt.Sprintf("%s:\n  %s: %s\n  %s: %s", p, an, la, bn, lb))
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			out = append(out, fmt.Sprintf("%s: only on %s", p, bn))
		}
	}
	slices.Sort(out)
	return out
}
