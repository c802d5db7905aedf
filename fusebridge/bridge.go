// Package fusebridge exposes a layer stack to the kernel through FUSE.
//
// It is written on go-fuse's raw protocol API (fuse.RawFileSystem) rather
// than its node API, because mortar needs the lock owner on FLUSH and
// RELEASE, full control of readdir offsets and of inode numbers.
//
// MountLoopback mounts a plain directory with the same kernel settings
// through go-fuse's loopback file system: the FUSE ceiling that `mortar
// passthrough` and the benchmark's fuse-passthrough target measure.
//
// # Inodes
//
// The layer contract addresses inodes by path; the kernel addresses them by
// node id. The bridge keeps a table of the nodes the kernel knows: a node's
// id is its gfid folded to 64 bits (layer.Gfid.Ino, the root is 1), so all
// names of one gfid are one node and hard links share an inode. Each node
// records the names (parent node, name) it is known by and the kernel's
// lookup count; its path is found by walking one name up to the root. A
// node whose last name is gone while the kernel still holds it (an open,
// unlinked file) answers path operations with ENOENT, while operations on
// its open files keep working; GETATTR and SETATTR fall back to an open file
// of the node when it has no name.
//
// # Directories
//
// An open directory lists itself with layer.ReadDirAll when the kernel
// reads at offset 0 (opendir, rewinddir) and serves every offset from that
// snapshot, so telldir/seekdir offsets stay valid: entry i, counting "."
// and ".." first, has offset i+1. READDIRPLUS gives the kernel the
// snapshot's attributes, except for inodes changed through this mount
// since the snapshot, which the kernel then looks up afresh.
//
// # Interrupts
//
// Only SETLKW honours the kernel's INTERRUPT (the kernel restarts the lock
// call after a signal); a wait also ends when its file is released. Other
// operations run to completion: Go programs receive preemption signals all
// the time, and an EINTR from stat(2) or mkdir(2) would surprise them.
// Layers that talk to the network keep their own timeouts.
//
// # Permissions
//
// The mount uses default_permissions: the kernel checks access from the
// modes and owners the layers report, and new inodes belong to the caller.
//
// # I/O size
//
// READ and WRITE requests carry up to 1 MiB: go-fuse asks the kernel for
// max_pages from MaxWrite (capped by /proc/sys/fs/fuse/max_pages_limit),
// and Mount raises the mount's read-ahead, which the kernel otherwise
// keeps at 128 KiB (see Options.ReadAhead).
//
// # Using the mount from the serving process
//
// A process that serves a mount should not execute files on it, nor start
// commands with their working directory on it: Go starts commands with
// vfork, the forked child holds a thread of the parent until its execve
// returns, and a garbage collection that stops the world meanwhile leaves
// nothing to serve that execve.
package fusebridge

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/mortarfs/mortar/layer"
)

// Options tune a mount.
type Options struct {
	FsName string // shown as the source in /proc/mounts, e.g. "host:/gv0"

	// How long the kernel may cache attributes, names and negative lookups.
	// Zero means one second; a negative value disables that cache.
	AttrTimeout     time.Duration
	EntryTimeout    time.Duration
	NegativeTimeout time.Duration

	// AllowOther lets users other than the one who mounted use the mount
	// (mount option allow_other). Set it when mounting as root for other
	// users: permissions are still enforced by the kernel
	// (default_permissions) from the modes and owners of the inodes.
	// Unprivileged mounts need user_allow_other in /etc/fuse.conf for it.
	AllowOther bool

	// MaxBackground is the number of asynchronous requests (read-ahead,
	// write-back, releases) the kernel may have in flight; zero means 64.
	MaxBackground int

	// ReadAhead is the kernel's read-ahead for sequential reads, in bytes;
	// zero means 1 MiB, negative leaves the kernel's default (128 KiB).
	// Setting it needs root (it is written to /sys/class/bdi).
	ReadAhead int

	// FileCapabilities passes reads of the security.capability xattr to
	// the layers. The kernel reads it before every write (to drop file
	// capabilities), which costs a round trip per write; without this
	// option the bridge answers ENODATA itself, so file capabilities
	// (setcap) do not apply to executables on the volume.
	FileCapabilities bool

	// Notifier, if set, makes the kernel forget what other clients
	// changed (see Notifier).
	Notifier *Notifier

	// KeepCache keeps a file's page cache across its opens
	// (FOPEN_KEEP_CACHE, with CAP_AUTO_INVAL_DATA as a backstop), so
	// that reading a file again reads no brick. Set it only when the
	// Notifier is told of other clients' changes (the volume's
	// features.cache-invalidation on): otherwise a reopen would serve
	// what another client has overwritten.
	KeepCache bool

	// Debug logs every FUSE request and reply at debug level.
	Debug  bool
	Logger *slog.Logger // nil discards logs
}

const (
	defaultTimeout       = time.Second
	defaultMaxBackground = 64
	maxIO                = 1 << 20 // largest READ and WRITE we ask for
	generation           = 1
)

func (o *Options) setDefaults() {
	for _, d := range []*time.Duration{&o.AttrTimeout, &o.EntryTimeout, &o.NegativeTimeout} {
		switch {
		case *d == 0:
			*d = defaultTimeout
		case *d < 0:
			*d = 0
		}
	}
	if o.ReadAhead == 0 {
		o.ReadAhead = maxIO
	}
	if o.MaxBackground <= 0 {
		o.MaxBackground = defaultMaxBackground
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// mountOptions are the go-fuse options Mount uses.
func (o *Options) mountOptions() *fuse.MountOptions {
	mo := &fuse.MountOptions{
		FsName:        o.FsName,
		Name:          "mortar", // /proc/mounts says fuse.mortar
		DirectMount:   true,     // go-fuse falls back to fusermount
		MaxWrite:      maxIO,    // go-fuse derives max_read and max_pages from it
		MaxReadAhead:  maxIO,
		MaxBackground: o.MaxBackground,
		EnableLocks:   true,
		AllowOther:    o.AllowOther,
		Options:       []string{"default_permissions"},
		// O_TRUNC arrives with OPEN instead of as a separate SETATTR;
		// asynchronous direct I/O (libaio, iodepth > 1) reaches us with
		// several requests in flight instead of one at a time.
		// With KILLPRIV_V2 the bridge clears set-user-ID bits after
		// unprivileged writes, truncates and chowns (killpriv.go), so
		// the kernel need not fetch the mode first: a GETATTR less before
		// every chown (untar, cp -a).
		ExtraCapabilities: fuse.CAP_ATOMIC_O_TRUNC | fuse.CAP_ASYNC_DIO | fuse.CAP_HANDLE_KILLPRIV_V2,
		Debug:             o.Debug,
		Logger:            slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug),
	}
	if o.KeepCache {
		mo.ExtraCapabilities |= fuse.CAP_AUTO_INVAL_DATA
	}
	if mo.FsName == "" {
		mo.FsName = "mortar"
	}
	return mo
}

// Mount mounts top at mountpoint and starts serving it. The returned
// server's Wait returns when the file system is unmounted.
func Mount(mountpoint string, top layer.Layer, opts Options) (*fuse.Server, error) {
	return newBridge(top, opts).mount(mountpoint)
}

func (fs *bridge) mount(mountpoint string) (*fuse.Server, error) {
	srv, err := serve(fs, mountpoint, fs.opts.mountOptions(), fs.opts)
	if err == nil && fs.opts.Notifier != nil {
		done := make(chan struct{})
		go func() {
			srv.Wait()
			close(done)
		}()
		go fs.opts.Notifier.run(fs, srv, done)
	}
	return srv, err
}

// serve mounts raw at mountpoint with mo and starts serving it, then sets
// the read-ahead of opts (with defaults) and keeps the FUSE connection from
// children.
func serve(raw fuse.RawFileSystem, mountpoint string, mo *fuse.MountOptions, opts Options) (*fuse.Server, error) {
	srv, err := fuse.NewServer(raw, mountpoint, mo)
	if err != nil {
		return nil, err
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		srv.Unmount()
		return nil, err
	}
	closeOnExec()
	if opts.ReadAhead > 0 {
		if err := setReadAhead(mountpoint, opts.ReadAhead); err != nil {
			opts.Logger.Info("cannot set read-ahead", "mountpoint", mountpoint, "err", err)
		}
	}
	opts.Logger.Debug("mounted", "mountpoint", mountpoint, "fsname", mo.FsName)
	return srv, nil
}

// closeOnExec marks the process's /dev/fuse descriptors close-on-exec.
// go-fuse opens them without the flag; a child that inherits one keeps the
// connection alive, so that a mount whose server died hangs (instead of
// failing with ENOTCONN) as long as the child lives.
func closeOnExec() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && target == "/dev/fuse" {
			if fd, err := strconv.Atoi(e.Name()); err == nil {
				unix.CloseOnExec(fd)
			}
		}
	}
}

// setReadAhead sets the read-ahead of the mount at mountpoint. The kernel
// gives a FUSE mount at most its default read-ahead whatever the file
// system asks at INIT, so buffered reads would come in 128 KiB requests.
func setReadAhead(mountpoint string, bytes int) error {
	var st unix.Stat_t
	if err := unix.Stat(mountpoint, &st); err != nil {
		return err
	}
	p := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev))
	return os.WriteFile(p, []byte(strconv.Itoa(bytes/1024)), 0)
}

// bridge is the fuse.RawFileSystem over a layer stack.
type bridge struct {
	fuse.RawFileSystem // ENOSYS for what is not implemented here

	top     layer.Layer
	opts    Options
	log     *slog.Logger
	nodes   *table
	handles handleTable
	// seq numbers changes of attributes made through this mount (see
	// node.touched).
	seq atomic.Uint64
}

// touch records that n's attributes changed through this mount.
func (b *bridge) touch(n *node) {
	if n != nil {
		n.touched.Store(b.seq.Add(1))
	}
}

func newBridge(top layer.Layer, opts Options) *bridge {
	opts.setDefaults()
	return &bridge{
		RawFileSystem: fuse.NewDefaultRawFileSystem(),
		top:           top,
		opts:          opts,
		log:           opts.Logger,
		nodes:         newTable(),
		handles:       handleTable{m: make(map[uint64]*handle)},
	}
}

func (b *bridge) String() string { return "mortar" }

// ctx is the context of operations that ignore interrupts.
func (b *bridge) ctx() context.Context { return context.Background() }

// status turns a layer error into a FUSE status, logging I/O errors: the
// other errnos are answers, EIO is a failure someone should look at.
func (b *bridge) status(op, path string, err error) fuse.Status {
	if err == nil {
		return fuse.OK
	}
	errno := layer.UserErrno(err)
	if errno == syscall.EIO {
		b.log.Warn("operation failed", "op", op, "path", path, "err", err)
	}
	return fuse.Status(errno)
}

// errStatus turns a bridge-internal error (always an errno) into a status.
func errStatus(err error) fuse.Status {
	return fuse.Status(layer.UserErrno(err))
}

// owner is the owner of an inode created by the caller of in.
func owner(in *fuse.InHeader) layer.Owner {
	return layer.Owner{Uid: in.Uid, Gid: in.Gid, Gfid: layer.NewGfid()}
}

func (b *bridge) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	return fuse.OK // the kernel checks permissions (default_permissions)
}

func (b *bridge) StatFs(cancel <-chan struct{}, in *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	p, err := b.nodes.pathOf(in.NodeId)
	if err != nil {
		p = "/" // an unlinked node still lives on the volume
	}
	st, err := b.top.Statfs(b.ctx(), p)
	if err != nil {
		return b.status("statfs", p, err)
	}
	*out = fuse.StatfsOut{
		Blocks:  st.Blocks,
		Bfree:   st.Bfree,
		Bavail:  st.Bavail,
		Files:   st.Files,
		Ffree:   st.Ffree,
		Bsize:   st.Bsize,
		NameLen: st.NameLen,
		Frsize:  st.Frsize,
	}
	if out.NameLen == 0 || out.NameLen > layer.NameMax {
		out.NameLen = layer.NameMax
	}
	return fuse.OK
}
