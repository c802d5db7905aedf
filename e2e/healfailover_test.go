package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Every node serving a brick of a replicated volume runs its heal
// daemon; the first node in brick order acts, the others stand by. Here
// host 0's management daemon is killed (its brick goes on serving: the
// brick host outlives it), host 2 misses writes and comes back:
// host 1's daemon takes over, heal requests sent to host 1 are answered
// there, and the returned brick is healed. Before, the heal daemon ran on
// the first brick's node only: nothing healed, and `heal info` failed,
// until host 0's daemon came back.
func TestMultiHostHealFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	l := newMortarLab(t, ctx, 3, "--keep-bricks=true")
	l.formCluster()
	create := []string{"volume", "create", "hv", "replica", "3"}
	for _, h := range l.others() {
		create = append(create, l.Hosts[h].Addr+":"+l.brick(h, "hv"))
	}
	l.must(1, append(create, "force")...)
	l.must(1, "volume", "set", "hv", "network.ping-timeout", "2")
	l.must(1, "volume", "start", "hv")
	mnt := l.mount(1, "hv", ",secret-file="+filepath.Join(l.Hosts[0].Server().DataDir(), "secret"))
	files := writeFiles(t, mnt, "before", 4)

	srv := l.Hosts[0].Server()
	if err := syscall.Kill(srv.PID(), syscall.SIGKILL); err != nil { // the daemon alone, not its brick host
		t.Fatal(err)
	}
	<-srv.Exited()
	srv.Stop(time.Second) //nolint:errcheck // it is dead: this only reaps it
	l.await("host 1's heal daemon acts", 20*time.Second, func() bool {
		return strings.Contains(l.Hosts[1].Server().LogTail(400), `msg="heal daemon acting" volume=hv`)
	})

	if err := l.Hosts[2].Kill(); err != nil { // its server and its brick
		t.Fatal(err)
	}
	var missed []string
	l.await("writes with host 2 down", 30*time.Second, func() bool {
		var err error
		missed, err = tryWriteFiles(mnt, "missed", 4)
		return err == nil
	})
	files = append(files, missed...)
	if err := l.Hosts[2].Restart(ctx); err != nil { // its server starts its brick again
		t.Fatal(err)
	}
	var out string
	var err error
	if out, err = l.mortar(1, "volume", "heal", "hv", "wait", "--timeout", "60s"); err != nil {
		t.Fatalf("heal wait through host 1 with host 0's daemon dead: %v\n%s\n%s", err, out, l.logs())
	}
	for _, f := range files {
		want, err := os.ReadFile(filepath.Join(l.brick(1, "hv"), f))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(filepath.Join(l.brick(2, "hv"), f)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s on host 2's brick after the heal: %d bytes, %v; want %d bytes as host 1's", f, len(got), err, len(want))
		}
	}
	if log := l.Hosts[2].Server().LogTail(2000); strings.Contains(log, `msg="heal daemon acting" volume=hv`) {
		t.Errorf("host 2's heal daemon acted while host 1's did:\n%s", lastLines(log, 20))
	}
	// Host 0's daemon back (it takes its running brick over): it acts
	// again, host 1 stands by, and heal requests through host 1 are
	// answered.
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	l.await("host 1's heal daemon stands by", 20*time.Second, func() bool {
		return strings.Contains(l.Hosts[1].Server().LogTail(400), `msg="heal daemon standing by: a node before this one in brick order answers" volume=hv`)
	})
	if out, err = l.mortar(1, "volume", "heal", "hv", "info"); err != nil || strings.Count(out, "Status: Connected") != 3 {
		t.Errorf("heal info through host 1 with host 0 back: %v\n%s", err, out)
	}
}

// Each set of a distributed-replicated volume is healed by the first
// node of its bricks: here set 0's bricks start on host 0 and set 1's on
// host 1, host 2 misses writes to both, and after its return host 0
// heals set 0 while host 1 heals set 1; heal info through host 2 counts
// both.
func TestMultiHostHealBySet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	l := newMortarLab(t, ctx, 3)
	l.formCluster()
	create := []string{"volume", "create", "dr", "replica", "3"}
	for _, h := range []int{0, 1, 2, 1, 2, 0} {
		create = append(create, l.Hosts[h].Addr+":"+l.brick(h, fmt.Sprintf("dr%d", len(create))))
	}
	l.must(1, append(create, "force")...)
	l.must(1, "volume", "set", "dr", "network.ping-timeout", "2")
	l.must(1, "volume", "start", "dr")
	mnt := l.mount(1, "dr", ",secret-file="+filepath.Join(l.Hosts[0].Server().DataDir(), "secret"))
	if err := l.Hosts[2].Kill(); err != nil {
		t.Fatal(err)
	}
	var missed []string
	l.await("writes with host 2 down", 30*time.Second, func() bool {
		var err error
		missed, err = tryWriteFiles(mnt, "missed", 24)
		return err == nil
	})
	if err := l.Hosts[2].Restart(ctx); err != nil {
		t.Fatal(err)
	}
	out, err := l.mortar(2, "volume", "heal", "dr", "wait", "--timeout", "60s")
	if err != nil {
		t.Fatalf("heal wait: %v\n%s\n%s", err, out, l.logs())
	}
	for h := range 2 {
		if log := l.Hosts[h].Server().LogTail(3000); !strings.Contains(log, `msg=healed volume=dr`) {
			t.Errorf("host %d healed nothing of its set:\n%s", h, lastLines(log, 30))
		}
	}
	if log := l.Hosts[2].Server().LogTail(3000); strings.Contains(log, `msg=healed volume=dr`) {
		t.Errorf("host 2, first of no set, healed:\n%s", lastLines(log, 30))
	}
	var hi struct {
		Healed uint64 `json:"healed"`
	}
	if err := l.get(2, "/v1/volumes/dr/heal", &hi); err != nil || hi.Healed < uint64(len(missed)) {
		t.Errorf("heal info through host 2: %d healed, %v; want at least the %d files written", hi.Healed, err, len(missed))
	}
}
