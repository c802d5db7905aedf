package mgmt

import (
	"errors"
	"strings"
	"testing"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/volume/options"
)

func TestCheckVolumeName(t *testing.T) {
	good := []string{"gv0", "a", "A-b_c.d", strings.Repeat("v", 64)}
	for _, n := range good {
		if err := CheckVolumeName(n); err != nil {
			t.Errorf("CheckVolumeName(%q) = %v", n, err)
		}
	}
	bad := []string{"", ".", "..", "a/b", "a b", "gv0!", "é", strings.Repeat("v", 65)}
	for _, n := range bad {
		if err := CheckVolumeName(n); !errors.Is(err, api.ErrInvalid) {
			t.Errorf("CheckVolumeName(%q) = %v, want ErrInvalid", n, err)
		}
	}
}

func TestParseBrick(t *testing.T) {
	cases := []struct{ in, host, path string }{
		{"localhost:/data/b1", "localhost", "/data/b1"},
		{"h:/data//b1/", "h", "/data/b1"},
		{"[::1]:/b", "::1", "/b"},
		{"10.0.0.1:/", "10.0.0.1", "/"},
	}
	for _, c := range cases {
		h, p, err := ParseBrick(c.in)
		if err != nil || h != c.host || p != c.path {
			t.Errorf("ParseBrick(%q) = %q, %q, %v", c.in, h, p, err)
		}
	}
	for _, in := range []string{"nohost", ":/b", "h:rel/path", "[::1]/b", "h:"} {
		if _, _, err := ParseBrick(in); !errors.Is(err, api.ErrInvalid) {
			t.Errorf("ParseBrick(%q) = %v, want ErrInvalid", in, err)
		}
	}
}

func TestCheckOption(t *testing.T) {
	if err := checkOption(options.OptAttrTimeout, "0.5"); err != nil {
		t.Error(err)
	}
	if err := checkOption(options.OptPingTimeout, "0"); !errors.Is(err, api.ErrInvalid) {
		t.Errorf("ping-timeout 0: %v", err)
	}
	if err := checkOption(options.OptEntryTimeout, "soon"); !errors.Is(err, api.ErrInvalid) {
		t.Errorf("entry-timeout soon: %v", err)
	}
	for _, ok := range [][2]string{{options.OptQuickRead, "off"}, {options.OptQuickReadMaxFileSize, "1048576"}, {options.OptQuickReadMaxFileSize, "1"}, {options.OptQuickReadCacheTimeout, "0.2"}} {
		if err := checkOption(ok[0], ok[1]); err != nil {
			t.Errorf("%s %s: %v", ok[0], ok[1], err)
		}
	}
	for _, bad := range [][2]string{{options.OptQuickRead, "yes"}, {options.OptQuickReadMaxFileSize, "1048577"}, {options.OptQuickReadMaxFileSize, "0"},
		{options.OptQuickReadMaxFileSize, "64KB"}, {options.OptQuickReadCacheTimeout, "0"}, {options.OptQuickReadCacheTimeout, "-1"}} {
		if err := checkOption(bad[0], bad[1]); !errors.Is(err, api.ErrInvalid) {
			t.Errorf("%s %s: %v, want ErrInvalid", bad[0], bad[1], err)
		}
	}
}
