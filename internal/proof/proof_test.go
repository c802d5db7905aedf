package proof

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestMAC(t *testing.T) {
	m := MAC("s", "l", "ab", "c")
	if len(m) != Size || !Valid(m, "s", "l", "ab", "c") {
		t.Fatal("a MAC is not valid for its own message")
	}
	for _, other := range [][]string{{"s", "l", "a", "bc"}, {"s", "l", "abc"}, {"t", "l", "ab", "c"}, {"s", "m", "ab", "c"}, {"s", "l", "ab", "c", ""}} {
		if Valid(m, other[0], other[1], other[2:]...) {
			t.Errorf("MAC of s l ab c valid for %q", other)
		}
	}
	if bytes.Equal(MAC("s", "l"), MAC("s", "l", "")) {
		t.Error("no parts and one empty part give the same MAC")
	}
}

func TestSeal(t *testing.T) {
	sealed := Seal("k", "join", []byte("the cluster secret"))
	if bytes.Contains(sealed, []byte("the cluster secret")) {
		t.Fatal("sealed text shows the plain text")
	}
	got, err := Open("k", "join", sealed)
	if err != nil || string(got) != "the cluster secret" {
		t.Fatalf("Open: %q, %v", got, err)
	}
	altered := bytes.Clone(sealed)
	altered[len(altered)-1] ^= 1
	for name, c := range map[string]struct {
		secret, label string
		sealed        []byte
	}{"secret": {"j", "join", sealed}, "label": {"k", "probe", sealed}, "altered": {"k", "join", altered}, "short": {"k", "join", sealed[:5]}} {
		if _, err := Open(c.secret, c.label, c.sealed); !errors.Is(err, ErrOpen) {
			t.Errorf("another %s opened: %v", name, err)
		}
	}
}

func TestReplays(t *testing.T) {
	now := time.Now()
	r := NewReplays(time.Minute, 3)
	r.now = func() time.Time { return now }
	refuse := func(at time.Time, nonce, want string) {
		t.Helper()
		if err := r.Check(at, nonce); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Check(%v, %s): %v, want %q", now.Sub(at), nonce, err, want)
		}
	}
	if err := r.Check(now, "a"); err != nil {
		t.Fatal(err)
	}
	refuse(now, "a", "replayed")
	refuse(now.Add(-61*time.Second), "b", "±1m0s")
	refuse(now.Add(61*time.Second), "b", "±1m0s")
	refuse(now.Add(-3*time.Second), "b", "before this process started")
	now = now.Add(30 * time.Second)
	if err := r.Check(now.Add(time.Minute), "b"); err != nil {
		t.Fatal(err)
	}
	// b stays within the window until now+2m: it must be remembered
	// across a rotation (at start+2m).
	for _, d := range []time.Duration{time.Minute, 90 * time.Second, 119 * time.Second} {
		now = r.start.Add(30*time.Second + d)
		refuse(now.Add(time.Minute-d), "b", "replayed")
	}
	if err := r.Check(now, "c"); err != nil {
		t.Fatal(err)
	}
	if err := r.Check(now, "d"); err != nil {
		t.Fatal(err)
	}
	if err := r.Check(now, "e"); err != nil {
		t.Fatal(err)
	}
	refuse(now, "f", "too many")
	now = now.Add(10 * time.Minute)
	if err := r.Check(now, "f"); err != nil || len(r.old) != 0 {
		t.Fatalf("after a long idle time: %v, %d old nonces", err, len(r.old))
	}
}
