// Package client is mortar's Go client library — the equivalent of
// GlusterFS's gfapi: it opens a volume by "host:/name" and does file
// operations on it directly, without FUSE or a kernel mount.
//
//	vol, err := client.Open(ctx, "localhost:/gv0", client.Options{})
//	if err != nil { ... }
//	defer vol.Close()
//	err = vol.WriteFile(ctx, "docs/hello.txt", []byte("hi\n"), 0o644)
//	data, err := vol.ReadFile(ctx, "docs/hello.txt")
//
// Names are slash-separated paths relative to the volume root ("a/b" and
// "/a/b" are the same file); they may not climb above the root. Errors are
// *fs.PathError values wrapping the syscall.Errno the volume returned, so
// errors.Is(err, fs.ErrNotExist) works as with the os package.
//
// Operations run as the calling process's user and group for ownership of
// new files; permission checks are the server's (the brick runs as root),
// so a library user has the rights of root on the volume, as gfapi users do.
package client

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/mortarfs/mortar/layer"
	"github.com/mortarfs/mortar/layer/crypt"
	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/tlsconf"
	"github.com/mortarfs/mortar/volume"
)

// Options tune how a volume is opened.
type Options struct {
	Logger *slog.Logger
	// Build passes connection settings (e.g. Dial) to the graph.
	Build volume.BuildOptions
	// NoFollow keeps the volume's layout as Open fetched it. By default a
	// volume opened from a server follows the changes of its spec (options
	// set, bricks added, removed or moved) without being opened again.
	NoFollow bool
	// Key is the volume key of an encrypted volume (32 bytes); without
	// it, the key is read from KeyFile (64 hex digits), or else from the
	// environment variable MORTAR_VOLUME_KEY.
	Key     []byte
	KeyFile string
	// Secret is the cluster secret (a node's DATA/secret), which a node
	// without TLS requires of a program on another machine unless the
	// volume's auth.allow names its address; empty: the file named by
	// the environment variable MORTAR_SECRET_FILE, if set.
	Secret string
	// TLS is the certificate the program presents to a cluster secured
	// with TLS (a client certificate, tlsconf.Load): its API is then
	// HTTPS (Secret and MORTAR_SECRET_FILE are not used) and its bricks
	// TLS, unless Build.Dial says otherwise. nil: a cluster without TLS.
	TLS *tlsconf.Identity
}

// Volume is an open volume. Its methods may be called concurrently.
type Volume struct {
	live       *volume.Live
	top        layer.Layer
	uid        uint32
	gid        uint32
	stopFollow context.CancelFunc // nil when not following
	followDone chan struct{}
}

// ParseTarget splits "host:/name" or "host:port:/name" into the management
// address and the volume name.
func ParseTarget(target string) (addr, name string, err error) {
	i := strings.LastIndex(target, ":/")
	if i <= 0 || i+2 >= len(target) || strings.Contains(target[i+2:], "/") {
		return "", "", fmt.Errorf("volume %q: want SERVER:/NAME (SERVER is host or host:port)", target)
	}
	return target[:i], target[i+2:], nil
}

// Open fetches the volume's spec from the server named in target and
// connects to its bricks. Unless opts.NoFollow, the volume then follows
// the changes of its spec that the server publishes: new operations go to
// the new layout, files already open finish on the old one.
func Open(ctx context.Context, target string, opts Options) (*Volume, error) {
	addr, name, err := ParseTarget(target)
	if err != nil {
		return nil, err
	}
	mc, err := opts.api(addr)
	if err != nil {
		return nil, err
	}
	spec, err := mc.Spec(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("volume %s: %w", target, err)
	}
	v, err := OpenSpec(spec, opts)
	if err != nil || opts.NoFollow {
		return v, err
	}
	v.Follow(mc, name)
	return v, nil
}

// Follow makes the volume follow the changes of the spec of volume name
// that the management API mc publishes, until Close: new operations go
// to the new layout, files already open finish on the old one. Open
// does it unless Options.NoFollow; call it once, on a volume OpenSpec
// opened.
func (v *Volume) Follow(mc *api.Client, name string) {
	ctx, cancel := context.WithCancel(context.Background())
	v.stopFollow, v.followDone = cancel, make(chan struct{})
	go func() {
		defer close(v.followDone)
		v.live.Follow(ctx, mc.SpecFollower(name, v.live.Version))
	}()
}

// OpenSpec connects to the bricks of a volume whose spec the caller has.
// The volume keeps that spec (see Follow, and Open).
func OpenSpec(spec volume.Spec, opts Options) (*Volume, error) {
	if opts.Build.Logger == nil {
		opts.Build.Logger = opts.Logger
	}
	if opts.TLS != nil && opts.Build.Dial == nil {
		opts.Build.Dial = opts.TLS.Dialer(5 * time.Second)
	}
	if spec.Encrypted() && len(opts.Build.Key) == 0 {
		key, err := crypt.ResolveKey(opts.Key, opts.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", spec.Name, err)
		}
		opts.Build.Key = key
	}
	g, err := volume.Build(spec, opts.Build)
	if err != nil {
		return nil, fmt.Errorf("volume %s: %w", spec.Name, err)
	}
	if err := g.CheckKey(context.Background(), volume.DefaultConnectWait, opts.Build.Logger); err != nil {
		g.Close()
		return nil, err
	}
	live := volume.NewLive(g, volume.WithBuildOptions(opts.Build))
	return &Volume{live: live, top: live, uid: uint32(os.Getuid()), gid: uint32(os.Getgid())}, nil
}

// Close stops following the volume's spec and disconnects from the
// bricks; files still open fail from then on.
func (v *Volume) Close() error {
	if v.stopFollow != nil {
		v.stopFollow()
		<-v.followDone
	}
	return v.live.Close()
}

// Spec returns the spec the volume runs on now.
func (v *Volume) Spec() volume.Spec { return v.live.Spec() }

// Layer returns the volume's top layer, for callers that want the raw
// file-operation contract. It follows the volume's spec as the Volume
// does.
func (v *Volume) Layer() layer.Layer { return v.top }

// resolve turns a name into a clean volume path.
func resolve(op, name string) (string, error) {
	p := path.Clean("/" + name)
	if strings.Contains(name, "\x00") {
		return "", &fs.PathError{Op: op, Path: name, Err: syscall.EINVAL}
	}
	if err := layer.CheckPath(p); err != nil {
		return "", &fs.PathError{Op: op, Path: name, Err: err}
	}
	return p, nil
}

func pathErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: name, Err: layer.UserErrno(err)}
}

func (v *Volume) owner() layer.Owner {
	return layer.Owner{Uid: v.uid, Gid: v.gid, Gfid: layer.NewGfid()}
}

// api is the client of the management API at addr that o's credentials
// make: HTTPS with o.TLS, else requests signed with the cluster secret
// (when there is one).
func (o Options) api(addr string) (*api.Client, error) {
	if o.TLS != nil {
		return api.NewTLSClient(addr, o.TLS), nil
	}
	secret, err := o.secret()
	if err != nil {
		return nil, err
	}
	return api.NewClient(addr).WithSecret(secret), nil
}

// secret is the cluster secret Open presents: Options.Secret, or the
// file MORTAR_SECRET_FILE names, or none.
func (o Options) secret() (string, error) {
	if o.Secret != "" {
		return o.Secret, nil
	}
	if f := os.Getenv(api.SecretFileEnv); f != "" {
		return api.ReadSecretFile(f)
	}
	return "", nil
}
