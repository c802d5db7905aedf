package wire

import (
	"bytes"
	"io"
	"net"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/mortarfs/mortar/layer"
)

func sampleRequests() []*Request {
	g := layer.NewGfid()
	return []*Request{
		{Op: OpHandshake, Version: Version, VolumeID: "vol", BrickID: "b1"},
		{Op: OpHandshake, Version: Version, VolumeID: "vol", BrickID: "b1", Proof: HandshakeProof("s", "vol", "b1", make([]byte, ChallengeSize))},
		{Op: OpLookup, Path: "/a/b"},
		{Op: OpLookupData, Path: "/a/small", Max: 65536},
		{Op: OpSetattr, Path: "/x", Setattr: layer.SetattrIn{Valid: layer.SetMode | layer.SetMtime, Mode: 0o644, Mtime: layer.Timespec{Sec: 5, Nsec: 7}}},
		{Op: OpMknod, Path: "/p", Owner: layer.Owner{Uid: 1, Gid: 2, Gfid: g}, Mode: 0o10644, Rdev: 9, Linkto: "brick-2"},
		{Op: OpRename, Path: "/a", Path2: "/b", Flags: layer.RenameNoReplace},
		{Op: OpCreate, Path: "/f", Owner: layer.Owner{Uid: 3}, Flags: 0o1101, Mode: 0o600},
		{Op: OpReaddir, Path: "/", Cookie: 77, Max: 100},
		{Op: OpSetxattr, Path: "/f", Name: "user.k", Value: []byte("v\x00v"), Flags: 1},
		{Op: OpRead, Fh: 4, Off: 1 << 40, Len: 1 << 20},
		{Op: OpWrite, Fh: 4, Off: 12},
		{Op: OpSetlk, Fh: 4, LockOwner: 99, Lock: layer.Lock{Type: 1, Start: 2, End: 3, Pid: 4, Flock: true}, Wait: true},
	}
}

func TestRequestRoundTrip(t *testing.T) {
	for _, r := range sampleRequests() {
		var e Enc
		r.Encode(&e)
		got, err := DecodeRequest(r.Op, e.B)
		if err != nil {
			t.Fatalf("%s: %v", OpName(r.Op), err)
		}
		if !reflect.DeepEqual(normal(got), normal(r)) {
			t.Errorf("%s: decoded %+v, want %+v", OpName(r.Op), got, r)
		}
		if len(e.B) > 0 {
			if _, err := DecodeRequest(r.Op, e.B[:len(e.B)-1]); err == nil && r.Op != OpWrite && r.Op != OpWriteGap {
				t.Errorf("%s: truncated request decoded without error", OpName(r.Op))
			}
		}
	}
}

func TestWriteCarriesData(t *testing.T) {
	var e Enc
	(&Request{Op: OpWrite, Fh: 1, Off: 2}).Encode(&e)
	e.B = append(e.B, "payload"...)
	r, err := DecodeRequest(OpWrite, e.B)
	if err != nil || string(r.Data) != "payload" || r.Off != 2 {
		t.Fatalf("got %+v, %v", r, err)
	}
}

// A LookupData answer tells content not given (nil) from an empty file's
// content (empty), and carries the content byte for byte.
func TestLookupDataRoundTrip(t *testing.T) {
	a := layer.Attr{Gfid: layer.NewGfid(), Mode: 0o100644, Nlink: 1, Size: 5, Mtime: layer.Timespec{Sec: 9, Nsec: 8}}
	for _, data := range [][]byte{nil, {}, []byte("hello"), bytes.Repeat([]byte{0, 0xff}, 1<<19)} {
		var e Enc
		e.LookupData(&a, data)
		d := Dec{B: e.B}
		ga, gd := d.LookupData()
		if err := d.Done(); err != nil {
			t.Fatalf("%d bytes: %v", len(data), err)
		}
		if ga != a || (gd == nil) != (data == nil) || !bytes.Equal(gd, data) {
			t.Errorf("%d bytes (nil %v): decoded %+v and %d bytes (nil %v)", len(data), data == nil, ga, len(gd), gd == nil)
		}
		d = Dec{B: e.B[:len(e.B)-1]}
		d.LookupData()
		if d.Done() == nil {
			t.Errorf("%d bytes: truncated answer decoded without error", len(data))
		}
	}
}

func TestDirPageRoundTrip(t *testing.T) {
	p := layer.DirPage{Next: 5, EOF: true, Entries: []layer.Entry{
		{Name: "a", Attr: layer.Attr{Mode: 0o100644, Size: 3, Gfid: layer.NewGfid()}},
		{Name: "b", Attr: layer.Attr{Mode: 0o40755, Linkto: "x"}},
		{Name: "l", Attr: layer.Attr{Mode: 0o120777, Size: 4}, Target: "a/b/"},
	}}
	for _, targets := range []bool{false, true} {
		var e Enc
		e.DirPage(&p, targets)
		d := Dec{B: e.B}
		got := d.DirPage(targets)
		want := p
		if !targets { // not asked for: not sent
			want.Entries = slices.Clone(p.Entries)
			want.Entries[2].Target = ""
		}
		if err := d.Done(); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("targets %v: got %+v, %v", targets, got, err)
		}
		// A page claiming more entries than its bytes can hold fails
		// before allocating them.
		bad := append([]byte(nil), e.B...)
		bad[9], bad[10], bad[11], bad[12] = 0xff, 0xff, 0xff, 0x7f
		d = Dec{B: bad}
		d.DirPage(targets)
		if d.Err == nil {
			t.Fatal("oversized entry count accepted")
		}
	}
}

func TestHeaderChecks(t *testing.T) {
	h := Header{Len: 10, Kind: KindRequest, Op: OpLookup, ID: 42}
	var b [HeaderSize]byte
	h.Put(b[:])
	got, err := ParseHeader(b[:])
	if err != nil || got != h {
		t.Fatalf("got %+v, %v", got, err)
	}
	h.Flags = FlagNoReply
	h.Put(b[:])
	if got, err := ParseHeader(b[:]); err != nil || got != h {
		t.Fatalf("a request for no answer: got %+v, %v", got, err)
	}
	for name, mutate := range map[string]func(*[HeaderSize]byte){
		"oversized":        func(b *[HeaderSize]byte) { b[3] = 0xff },
		"kind":             func(b *[HeaderSize]byte) { b[4] = 99 },
		"flags":            func(b *[HeaderSize]byte) { b[6] = 4 },
		"keep-undo answer": func(b *[HeaderSize]byte) { b[4], b[6] = KindResponse, FlagKeepUndo },
		"no-reply answer":  func(b *[HeaderSize]byte) { b[4], b[6] = KindResponse, FlagNoReply },
		"reserved":         func(b *[HeaderSize]byte) { b[21] = 1 },
	} {
		c := b
		mutate(&c)
		if _, err := ParseHeader(c[:]); err == nil {
			t.Errorf("%s: bad header accepted", name)
		}
	}
}

func TestBufAligned(t *testing.T) {
	for _, n := range []int{1, 4096, 100 << 10, 1 << 20, MaxIO} {
		b := GetBuf(n)
		if len(b) != n || uintptrOf(b)%Align != 0 {
			t.Fatalf("GetBuf(%d): len %d aligned %v", n, len(b), uintptrOf(b)%Align == 0)
		}
		PutBuf(b)
	}
}

func TestWriteHead(t *testing.T) {
	for _, op := range []uint8{OpWrite, OpWriteGap} {
		var e Enc
		(&Request{Op: op, Fh: 1, Off: 2, Pending: 3, Gap: layer.Gap{At: 4, Len: 5}}).Encode(&e)
		if head, ok := DataFollows(op); !ok || len(e.B) != head {
			t.Fatalf("%s fields take %d bytes, DataFollows says %d", OpName(op), len(e.B), head)
		}
	}
}

// A frame sent with SendLater reaches the other end by itself (within
// laterDelay), or with the next frame sent, in order.
func TestSendLater(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	w := NewWriter(a, 0)
	read := func() Header {
		t.Helper()
		var hb [HeaderSize]byte
		b.SetReadDeadline(time.Now().Add(5 * time.Second))
		h, err := ReadHeader(b, &hb)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(b, make([]byte, h.Len)); err != nil {
			t.Fatal(err)
		}
		return h
	}
	if err := w.SendLater(Header{Kind: KindRequest, Op: OpRelease, ID: 1, Flags: FlagNoReply}, []byte("12345678")); err != nil {
		t.Fatal(err)
	}
	if h := read(); h.ID != 1 || h.Flags != FlagNoReply || h.Len != 8 {
		t.Fatalf("alone: got %+v", h)
	}
	if err := w.SendLater(Header{Kind: KindRequest, Op: OpRelease, ID: 2, Flags: FlagNoReply}, nil); err != nil {
		t.Fatal(err)
	}
	go w.Send(Header{Kind: KindRequest, Op: OpLookup, ID: 3}, []byte("x"))
	if h := read(); h.ID != 2 {
		t.Fatalf("first of two: got %+v", h)
	}
	if h := read(); h.ID != 3 {
		t.Fatalf("second of two: got %+v", h)
	}
}

// A version 4 client's Setlk (without the Flags version 5 added) decodes,
// with no lease asked.
func TestSetlkOfVersion4Decodes(t *testing.T) {
	var e Enc
	e.U64(4)                                              // fh
	e.U64(99)                                             // lock owner
	e.Lock(layer.Lock{Type: 1, Start: 2, End: 3, Pid: 4}) // lock
	e.Bool(true)                                          // wait
	e.U8(0)                                               // lock domain
	r, err := DecodeRequest(OpSetlk, e.B)
	if err != nil {
		t.Fatal(err)
	}
	if r.Fh != 4 || r.LockOwner != 99 || !r.Wait || r.Flags != 0 {
		t.Fatalf("decoded %+v", r)
	}
	if _, err := DecodeRequest(OpSetlk, append(e.B, 1)); err == nil {
		t.Fatal("a Setlk with a truncated Flags field decoded")
	}
}
