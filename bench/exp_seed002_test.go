package bench

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseDDRecorded reads dd outputs recorded on this kind of machine
// (testdata/dd): the rate comes from bytes / seconds, whatever unit dd
// chose to print, and failures are errors.
func TestParseDDRecorded(t *testing.T) {
	for _, c := range []struct {
		file    string
		want    float64 // MB/s
		wantErr string
	}{
		{file: "gbps.txt", want: 4294967296 / 0.132501 / 1e6},
		{file: "gbps_direct.txt", want: 268435456 / 0.2252 / 1e6},
		{file: "mbps_gluster.txt", want: 268435456 / 3.49782 / 1e6},
		{file: "kbps.txt", want: 1024 / 0.00319975 / 1e6},
		{file: "enospc.txt", wantErr: "No space left on device"},
		{file: "noinput.txt", wantErr: "failed to open"},
		{file: "zero.txt", wantErr: "copied nothing"},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", "dd", c.file))
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseDD(string(b))
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: err %v, want %q", c.file, err, c.wantErr)
			}
			continue
		}
		if err != nil || math.Abs(got-c.want) > 1e-6*c.want {
			t.Errorf("%s: %v MB/s, %v; want %v", c.file, got, err, c.want)
		}
	}
}

// TestParseDDRateOnly falls back to the printed rate when the seconds
// cannot be read, in every unit dd prints.
func TestParseDDRateOnly(t *testing.T) {
	for line, want := range map[string]float64{
		"1048576 bytes (1.0 MB, 1.0 MiB) copied, 0 s, 2.5 GB/s": 2500,
		"1048576 bytes copied, ? s, 870 MB/s":                   870,
		"1024 bytes copied, x s, 320 kB/s":                      0.32,
		"1024 bytes copied, x s, 1.0 MiB/s":                     1.048576,
	} {
		got, err := parseDD(line + "\n")
		if err != nil || math.Abs(got-want) > 1e-9*want {
			t.Errorf("%q: %v, %v; want %v", line, got, err, want)
		}
	}
	for _, bad := range []string{"", "copied", "5 bytes copied, x s, 3 furlongs/s"} {
		if _, err := parseDD(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestSizes(t *testing.T) {
	if f, mib := seed002Sizes(false); f != 2000 || mib != 1024 {
		t.Errorf("seed002 full: %d files, %d MiB", f, mib)
	}
	if f, mib := seed002Sizes(true); f >= 2000 || mib >= 1024 {
		t.Errorf("seed002 quick: %d files, %d MiB", f, mib)
	}
	if d, p, _ := metadataSizes(false); d*p < 2000 {
		t.Errorf("metadata tree: %d files, want a few thousand", d*p)
	}
}

func TestMakeTree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "src")
	n, err := makeTree(dir, 12, 5)
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	filepath.Walk(dir, func(string, os.FileInfo, error) error { count++; return nil })
	if count != n {
		t.Errorf("makeTree says %d entries, walk finds %d", n, count)
	}
}
