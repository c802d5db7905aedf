package wire

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/mortarfs/mortar/layer"
)

// everyRequest returns one request of every operation with every field of
// its schema set to something other than zero.
func everyRequest() []*Request {
	g := layer.Gfid{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	full := Request{
		Path: "/a/b", Path2: "/c", Name: "user.k", Flags: 0o1101, Fh: 7, Off: 1 << 40, Len: 1 << 20,
		Mode: 0o100644, Owner: layer.Owner{Uid: 1, Gid: 2, Gfid: g},
		Setattr: layer.SetattrIn{Valid: layer.SetMode | layer.SetMtime, Mode: 0o600, Uid: 3, Gid: 4, Size: 5,
			Atime: layer.Timespec{Sec: 6, Nsec: 7}, Mtime: layer.Timespec{Sec: -8, Nsec: 9}},
		Rdev: 10, Linkto: "brick-2", Target: "../t", Cookie: 11, Max: 12, LockOwner: 13,
		Lock: layer.Lock{Type: 1, Start: 2, End: 3, Pid: 4, Flock: true},
		Wait: true, Value: []byte("v\x00v"), VolumeID: "vol", BrickID: "b1", Version: Version,
		Pending: 1<<63 | 5, Size: 42, Gfid: g, Ctime: layer.Timespec{Sec: 14, Nsec: 15},
		Proof: HandshakeProof("secret", "vol", "b1", make([]byte, ChallengeSize)),
		Locks: []layer.HeldLock{{Owner: 16, Lock: layer.Lock{Type: 2, Start: 17, End: 18, Pid: 19}}},
		Data:  []byte("made"),
		Gap:   layer.Gap{At: 20, Len: 21},
	}
	var out []*Request
	for op := OpHandshake; op < opMax; op++ {
		r := project(&full, op)
		if _, ok := DataFollows(op); ok {
			r.Data = []byte("data")
		}
		out = append(out, r)
	}
	return out
}

// fieldNames maps schema fields to Request's struct fields.
var fieldNames = map[field]string{
	fPath: "Path", fPath2: "Path2", fName: "Name", fFlags: "Flags", fFh: "Fh", fOff: "Off",
	fLen: "Len", fMode: "Mode", fOwner: "Owner", fSetattr: "Setattr", fRdev: "Rdev",
	fLinkto: "Linkto", fTarget: "Target", fCookie: "Cookie", fMax: "Max", fLockOwner: "LockOwner",
	fLock: "Lock", fWait: "Wait", fValue: "Value", fVolume: "VolumeID", fBrick: "BrickID",
	fVersion: "Version", fPending: "Pending", fGfid: "Gfid", fCtime: "Ctime", fSize: "Size", fProof: "Proof",
	fLockDomain: "Lock", // Lock.Domain
	fLocks:      "Locks",
	fData:       "Data", // OpMake's; a write's Data is its raw tail
	fGap:        "Gap",
}

// project returns the request for op carrying only the fields of r that
// op's schema encodes: what decoding r's encoding must give back.
func project(r *Request, op uint8) *Request {
	out := &Request{Op: op}
	src, dst := reflect.ValueOf(r).Elem(), reflect.ValueOf(out).Elem()
	for _, f := range schema[op] {
		name, ok := fieldNames[f]
		if !ok {
			panic("wire test: schema field without a name")
		}
		dst.FieldByName(name).Set(src.FieldByName(name))
	}
	return out
}

// normal clears the empty-versus-nil difference of byte fields.
func normal(r *Request) *Request {
	c := *r
	if len(c.Value) == 0 {
		c.Value = nil
	}
	if len(c.Proof) == 0 {
		c.Proof = nil
	}
	if len(c.Data) == 0 {
		c.Data = nil
	}
	if len(c.Locks) == 0 {
		c.Locks = nil
	}
	return &c
}

func TestEveryOpHasASchema(t *testing.T) {
	if len(fieldNames) != int(fGap)+1 {
		t.Fatalf("fieldNames covers %d fields, the schema has %d", len(fieldNames), fGap+1)
	}
	for op := OpHandshake; op < opMax; op++ {
		if schema[op] == nil {
			t.Errorf("%s has no schema", OpName(op))
		}
	}
	for _, r := range everyRequest() {
		var e Enc
		r.Encode(&e)
		e.B = append(e.B, rawTail(r)...)
		got, err := DecodeRequest(r.Op, e.B)
		if err != nil || !reflect.DeepEqual(normal(got), normal(r)) {
			t.Errorf("%s: decoded %+v, %v; want %+v", OpName(r.Op), got, err, r)
		}
	}
}

// rawTail is what follows a request's encoded fields: a write's data.
func rawTail(r *Request) []byte {
	if _, ok := DataFollows(r.Op); ok {
		return r.Data
	}
	return nil
}

// frame is a request frame: header and payload.
func frame(r *Request, id uint64) []byte {
	var e Enc
	r.Encode(&e)
	e.B = append(e.B, rawTail(r)...)
	var hb [HeaderSize]byte
	(&Header{Len: uint32(len(e.B)), Kind: KindRequest, Op: r.Op, ID: id}).Put(hb[:])
	return append(hb[:], e.B...)
}

// respDecoders are the decoders of response payloads, each with its
// encoder: what decodes whole must re-encode to the same bytes.
var respDecoders = map[string]struct {
	dec func(*Dec) any
	enc func(*Enc, any)
}{
	"attr":                 {func(d *Dec) any { return d.Attr() }, func(e *Enc, v any) { a := v.(layer.Attr); e.Attr(&a) }},
	"dirpage":              {func(d *Dec) any { return d.DirPage(false) }, func(e *Enc, v any) { p := v.(layer.DirPage); e.DirPage(&p, false) }},
	"dirpage with targets": {func(d *Dec) any { return d.DirPage(true) }, func(e *Enc, v any) { p := v.(layer.DirPage); e.DirPage(&p, true) }},
	"strs":                 {func(d *Dec) any { return d.Strs() }, func(e *Enc, v any) { e.Strs(v.([]string)) }},
	"statfs":               {func(d *Dec) any { return d.Statfs() }, func(e *Enc, v any) { s := v.(layer.Statfs); e.Statfs(&s) }},
	"lock":                 {func(d *Dec) any { return d.Lock() }, func(e *Enc, v any) { e.Lock(v.(layer.Lock)) }},
	"owner":                {func(d *Dec) any { return d.Owner() }, func(e *Enc, v any) { e.Owner(v.(layer.Owner)) }},
	"setattr":              {func(d *Dec) any { return d.Setattr() }, func(e *Enc, v any) { s := v.(layer.SetattrIn); e.Setattr(&s) }},
	"bytes":                {func(d *Dec) any { return d.Bytes() }, func(e *Enc, v any) { e.Bytes(v.([]byte)) }},
	"time":                 {func(d *Dec) any { return d.Time() }, func(e *Enc, v any) { e.Time(v.(layer.Timespec)) }},
	"lookupdata": {func(d *Dec) any { a, b := d.LookupData(); return lookupData{a, b} },
		func(e *Enc, v any) { ld := v.(lookupData); e.LookupData(&ld.attr, ld.data) }},
}

// lookupData is an OpLookupData answer, for respDecoders.
type lookupData struct {
	attr layer.Attr
	data []byte
}

// FuzzDecode feeds arbitrary frames to the header parser and to every
// decoder of the protocol: requests of every operation (whatever the
// header says) and every response encoding. They must fail cleanly and
// never panic; what parses must re-encode to the same bytes; an oversized
// header must be refused as such.
func FuzzDecode(f *testing.F) {
	for i, r := range everyRequest() {
		f.Add(frame(r, uint64(i)))
	}
	for _, kind := range []uint8{KindPing, KindPong, KindCancel, KindResponse} {
		var hb [HeaderSize]byte
		(&Header{Kind: kind, ID: 9, Errno: 2}).Put(hb[:])
		f.Add(hb[:])
	}
	var hb [HeaderSize]byte
	(&Header{Len: MaxPayload + 1, Kind: KindRequest, Op: OpLookup}).Put(hb[:])
	f.Add(hb[:])
	var e Enc
	e.DirPage(&layer.DirPage{Next: 3, EOF: true, Entries: []layer.Entry{{Name: "a", Attr: layer.Attr{Mode: 0o40755, Linkto: "x"}}}}, false)
	(&Header{Len: uint32(len(e.B)), Kind: KindResponse, Op: OpReaddir}).Put(hb[:])
	f.Add(append(hb[:], e.B...))
	for _, data := range [][]byte{nil, {}, []byte("small file\n")} {
		e = Enc{}
		e.LookupData(&layer.Attr{Mode: 0o100644, Size: uint64(len(data))}, data)
		(&Header{Len: uint32(len(e.B)), Kind: KindResponse, Op: OpLookupData}).Put(hb[:])
		f.Add(append(hb[:], e.B...))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		payload := frame[min(len(frame), HeaderSize):]
		h, err := ParseHeader(frame)
		switch {
		case err == nil:
			var back [HeaderSize]byte
			h.Put(back[:])
			if !bytes.Equal(back[:], frame[:HeaderSize]) {
				t.Fatalf("header %+v re-encodes differently", h)
			}
			if h.Len > MaxPayload || h.Kind < KindRequest || h.Kind > KindRecallDir {
				t.Fatalf("bad header accepted: %+v", h)
			}
			payload = payload[:min(len(payload), int(h.Len))]
		case len(frame) >= HeaderSize && h.Len > MaxPayload && !errors.Is(err, ErrFrameTooLarge):
			t.Fatalf("oversized frame refused with %v", err)
		}
		for op := uint8(0); op <= opMax; op++ {
			r, err := DecodeRequest(op, payload)
			if op == 0 || op == opMax {
				if err == nil {
					t.Fatalf("unknown op %d decoded", op)
				}
				continue
			}
			if err != nil {
				continue
			}
			var e Enc
			r.Encode(&e)
			e.B = append(e.B, rawTail(r)...)
			// An older client's request lacks the fields added since:
			// they re-encode as zeros at the end.
			if _, added := addedSince[op]; added && len(e.B) > len(payload) && bytes.Equal(e.B[:len(payload)], payload) &&
				!slices.ContainsFunc(e.B[len(payload):], func(b byte) bool { return b != 0 }) {
				e.B = e.B[:len(payload)]
			}
			if !bytes.Equal(e.B, payload) {
				t.Fatalf("%s: re-encoding differs", OpName(op))
			}
		}
		for name, c := range respDecoders {
			d := Dec{B: payload}
			v := c.dec(&d)
			if d.Done() != nil {
				continue
			}
			var e Enc
			c.enc(&e, v)
			if !bytes.Equal(e.B, payload) {
				t.Fatalf("%s response: re-encoding differs", name)
			}
		}
	})
}

// FuzzRequest builds requests of every operation from arbitrary field
// values: decoding an encoded request gives back the fields its schema
// carries.
func FuzzRequest(f *testing.F) {
	f.Add(uint8(OpRename), "/a", "/b", "user.x", uint64(1), uint64(2), uint64(3), []byte("v"), true)
	f.Add(uint8(OpWrite), "", "", "", uint64(1<<63), uint64(0), uint64(0), []byte("data"), false)
	f.Add(uint8(OpWriteGap), "", "", "", uint64(1<<63), uint64(4096), uint64(1<<44), []byte("data"), false)
	f.Add(uint8(OpHandshake), "vol", "brick", "", uint64(Version), uint64(0), uint64(0), []byte(nil), false)
	f.Add(uint8(OpHandshake), "vol", "brick", "", uint64(Version), uint64(0), uint64(0), HandshakeProof("s", "vol", "brick", make([]byte, ChallengeSize)), false)
	f.Fuzz(func(t *testing.T, op uint8, s1, s2, s3 string, n1, n2, n3 uint64, v []byte, b bool) {
		op = OpHandshake + op%(opMax-OpHandshake)
		g := layer.Gfid{byte(n1), byte(n2), byte(n3)}
		r := &Request{
			Path: s1, Path2: s2, Name: s3, Flags: uint32(n1), Fh: n2, Off: int64(n3), Len: int64(n1),
			Mode: uint32(n2), Owner: layer.Owner{Uid: uint32(n3), Gid: uint32(n1 >> 32), Gfid: g},
			Setattr: layer.SetattrIn{Valid: uint32(n1), Mode: uint32(n2), Uid: uint32(n3), Size: n1,
				Atime: layer.Timespec{Sec: int64(n2), Nsec: uint32(n3)}, Mtime: layer.Timespec{Sec: -int64(n1)}},
			Rdev: n3, Linkto: s2, Target: s3, Cookie: n1, Max: uint32(n2), LockOwner: n3,
			Lock: layer.Lock{Type: uint32(n1), Start: n2, End: n3, Pid: uint32(n1), Flock: b},
			Wait: b, Value: v, VolumeID: s1, BrickID: s2, Version: uint32(n3), Proof: v,
			Pending: n1, Size: n2, Gfid: g, Ctime: layer.Timespec{Sec: int64(n3), Nsec: uint32(n2)},
			Data: v, Gap: layer.Gap{At: uint32(n2), Len: uint32(n3 >> 32)},
		}
		want := project(r, op)
		if _, ok := DataFollows(op); ok {
			want.Data = v
		}
		var e Enc
		want.Encode(&e)
		e.B = append(e.B, rawTail(want)...)
		got, err := DecodeRequest(op, e.B)
		if err != nil {
			t.Fatalf("%s: %v", OpName(op), err)
		}
		if !reflect.DeepEqual(normal(got), normal(want)) {
			t.Fatalf("%s: decoded %+v, want %+v", OpName(op), got, want)
		}
	})
}
