package cli

import (
	"fmt"
	"math"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mortarfs/mortar/mgmt"
	"github.com/mortarfs/mortar/mgmt/api"
)

// mountOptions are the -o options of a mount.
type mountOptions struct {
	// Kernel cache timeouts; nil means "from the volume's options".
	AttrTimeout, EntryTimeout, NegativeTimeout *time.Duration
	LogFile                                    string
	LogLevel                                   string
	Debug                                      bool // log every FUSE request
	NoFollow                                   bool // keep the volume's layout of mount time

	// KeyFile is the absolute path of an encrypted volume's key.
	KeyFile string
	// TLSDir and TLSName are the identity a mount of a TLS cluster
	// presents (its certificate in the TLS directory).
	TLSDir, TLSName string
	// SecretFile is the absolute path of a copy of the cluster secret,
	// for a mount from another machine of a cluster without TLS.
	SecretFile string
}

// ignoredMountOptions are generic mount(8)/fstab options that mean nothing
// to mortar (mount(8) handles them or passes them along).
var ignoredMountOptions = map[string]bool{
	"defaults": true, "_netdev": true, "rw": true, "auto": true, "noauto": true,
	"nofail": true, "user": true, "nouser": true, "users": true, "owner": true,
	"group": true, "suid": true, "nosuid": true, "dev": true, "nodev": true,
	"exec": true, "noexec": true, "atime": true, "noatime": true, "relatime": true,
	"norelatime": true, "strictatime": true, "nodiratime": true, "diratime": true,
	"async": true, "allow_other": true, "default_permissions": true,
}

// mountOptionHelp documents the options mortar understands.
const mountOptionHelp = `Mount options (-o, comma separated):
  attr-timeout=SECONDS      how long the kernel caches attributes (default: the volume's
                            performance.attr-timeout, else 1)
  entry-timeout=SECONDS     how long the kernel caches names (performance.entry-timeout, 1)
  negative-timeout=SECONDS  how long the kernel caches failed lookups
                            (performance.negative-timeout, 0 = not at all)
  log-file=PATH             where a background mount logs
  log-level=LEVEL           debug, info, warn or error (default info)
  debug                     log every FUSE request (with log-level=debug)
  no-follow                 keep the volume's layout of mount time instead of following
                            its changes (options, bricks)
  key-file=PATH             the key of an encrypted volume: 64 hex digits (default: the
                            environment variable MORTAR_VOLUME_KEY)
  tls-dir=DIR,tls-name=NAME the client certificate to present to a TLS cluster:
                            DIR/NAME.pem, DIR/NAME.key, DIR/ca.pem (default: the
                            environment variables MORTAR_TLS_DIR, MORTAR_TLS_NAME)
  secret-file=PATH          a copy of the cluster secret (a node's DATA/secret), for a
                            mount from another machine of a cluster without TLS whose
                            volume's auth.allow does not name it (default: the
                            environment variable MORTAR_SECRET_FILE)
Generic options (defaults, _netdev, rw, auto, noauto, nofail, user, x-systemd.*, ...)
are accepted and ignored.`

// parseMountOptions parses -o option lists (each comma separated). With
// sloppy, unknown options are ignored instead of refused.
func parseMountOptions(lists []string, sloppy bool) (mountOptions, error) {
	var o mountOptions
	for _, list := range lists {
		for _, opt := range strings.Split(list, ",") {
			opt = strings.TrimSpace(opt)
			if opt == "" {
				continue
			}
			if err := o.set(opt, sloppy); err != nil {
				return o, err
			}
		}
	}
	return o, nil
}

// setAbs sets *dst to value made absolute (a background mount runs in /).
func setAbs(dst *string, opt, value string) error {
	abs, err := filepath.Abs(value)
	if err != nil {
		return fmt.Errorf("mount option %s: %w", opt, err)
	}
	*dst = abs
	return nil
}

// set applies one option.
func (o *mountOptions) set(opt string, sloppy bool) error {
	key, value, hasValue := strings.Cut(opt, "=")
	timeouts := map[string]**time.Duration{
		"attr-timeout":     &o.AttrTimeout,
		"entry-timeout":    &o.EntryTimeout,
		"negative-timeout": &o.NegativeTimeout,
	}
	switch {
	case timeouts[key] != nil:
		d, err := parseSeconds(value)
		if err != nil || !hasValue {
			return fmt.Errorf("mount option %s: want a number of seconds, as in %s=1", opt, key)
		}
		*timeouts[key] = &d
	case key == "log-file" && hasValue && value != "":
		o.LogFile = value
	case key == "log-level" && hasValue:
		o.LogLevel = value
	case key == "debug" && !hasValue:
		o.Debug = true
	case key == "no-follow" && !hasValue:
		o.NoFollow = true
	case key == "tls-dir" && hasValue && value != "":
		return setAbs(&o.TLSDir, opt, value)
	case key == "tls-name" && hasValue && value != "":
		o.TLSName = value
	case key == "key-file" && hasValue && value != "":
		return setAbs(&o.KeyFile, opt, value)
	case key == "secret-file" && hasValue && value != "":
		return setAbs(&o.SecretFile, opt, value)
	case key == "ro":
		return fmt.Errorf("mount option ro: read-only mounts are not supported yet")
	case ignoredMountOptions[key], strings.HasPrefix(key, "x-"), key == "comment", key == "_netdev":
	case sloppy:
	default:
		return fmt.Errorf("unknown mount option %q\n%s", opt, mountOptionHelp)
	}
	return nil
}

// parseSeconds parses a non-negative number of seconds.
func parseSeconds(s string) (time.Duration, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || math.IsNaN(f) || f > 86400 {
		return 0, fmt.Errorf("bad number of seconds %q", s)
	}
	return time.Duration(f * float64(time.Second)), nil
}

// parseSource splits SERVER:/NAME (SERVER is host or host:port, IPv6 in
// brackets) into the management address and the volume name.
func parseSource(src string) (server, name string, err error) {
	i := strings.LastIndex(src, ":/")
	if i <= 0 {
		return "", "", fmt.Errorf("mount source %q: want SERVER:/VOLUME, as in localhost:/gv0", src)
	}
	host, name := src[:i], src[i+2:]
	if err := mgmt.CheckVolumeName(name); err != nil {
		return "", "", fmt.Errorf("mount source %q: %w", src, err)
	}
	h, p, err := net.SplitHostPort(host)
	if err != nil {
		// No port: "host", "[v6]" or a bare IPv6 address.
		h, p = strings.Trim(host, "[]"), strconv.Itoa(api.DefaultPort)
	}
	if h == "" {
		return "", "", fmt.Errorf("mount source %q: the server is missing", src)
	}
	return net.JoinHostPort(h, p), name, nil
}

// helperArgs is mount(8)'s call of a helper:
//
//	mount.mortar SOURCE DIR [-sfnv] [-o OPTIONS] [-t TYPE] [-N NAMESPACE]
type helperArgs struct {
	Source, Dir string
	Options     []string
	Sloppy      bool // -s: ignore unknown options
	Fake        bool // -f: do everything but the mount
	Verbose     bool // -v
}

// parseHelperArgs parses the arguments mount(8) gives mount.mortar.
func parseHelperArgs(args []string) (helperArgs, error) {
	var h helperArgs
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		for j := 1; j < len(a); j++ {
			switch a[j] {
			case 's':
				h.Sloppy = true
			case 'f':
				h.Fake = true
			case 'n':
			case 'v':
				h.Verbose = true
			case 'o', 't', 'N':
				val := a[j+1:]
				if val == "" {
					if i+1 >= len(args) {
						return h, fmt.Errorf("option -%c needs a value", a[j])
					}
					i++
					val = args[i]
				}
				switch a[j] {
				case 'o':
					h.Options = append(h.Options, val)
				case 'N':
					return h, fmt.Errorf("-N %s: mounting in another namespace is not supported", val)
				}
				j = len(a)
			default:
				return h, fmt.Errorf("unknown option -%c", a[j])
			}
		}
	}
	if len(pos) != 2 {
		return h, fmt.Errorf("usage: %s SERVER:/VOLUME DIR [-o OPTIONS] [-s] [-f] [-n] [-v]", helperName)
	}
	h.Source, h.Dir = pos[0], pos[1]
	return h, nil
}
