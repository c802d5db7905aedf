package wire

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/mortarfs/mortar/layer"
)

// ErrShort is returned when a message ends before its fields do.
var ErrShort = errors.New("wire: message truncated")

// ErrTooLong is returned when a length field exceeds what the protocol
// allows.
var ErrTooLong = errors.New("wire: field too long")

// Enc appends fields to a byte slice in the protocol's encoding: fixed
// little-endian integers, and strings/bytes prefixed with a uint32 length.
type Enc struct{ B []byte }

func (e *Enc) U8(v uint8)   { e.B = append(e.B, v) }
func (e *Enc) U16(v uint16) { e.B = binary.LittleEndian.AppendUint16(e.B, v) }
func (e *Enc) U32(v uint32) { e.B = binary.LittleEndian.AppendUint32(e.B, v) }
func (e *Enc) U64(v uint64) { e.B = binary.LittleEndian.AppendUint64(e.B, v) }
func (e *Enc) I64(v int64)  { e.U64(uint64(v)) }

func (e *Enc) Bool(v bool) {
	if v {
		e.U8(1)
	} else {
		e.U8(0)
	}
}

func (e *Enc) Bytes(v []byte) {
	e.U32(uint32(len(v)))
	e.B = append(e.B, v...)
}

func (e *Enc) Str(v string) {
	e.U32(uint32(len(v)))
	e.B = append(e.B, v...)
}

func (e *Enc) Gfid(g layer.Gfid) { e.B = append(e.B, g[:]...) }

func (e *Enc) Time(t layer.Timespec) {
	e.I64(t.Sec)
	e.U32(t.Nsec)
}

func (e *Enc) Attr(a *layer.Attr) {
	e.Gfid(a.Gfid)
	e.U32(a.Mode)
	e.U32(a.Nlink)
	e.U32(a.Uid)
	e.U32(a.Gid)
	e.U64(a.Rdev)
	e.U64(a.Size)
	e.U64(a.Blocks)
	e.U32(a.Blksize)
	e.Time(a.Atime)
	e.Time(a.Mtime)
	e.Time(a.Ctime)
	e.Str(a.Linkto)
	e.U64(a.Pending)
}

func (e *Enc) Owner(o layer.Owner) {
	e.U32(o.Uid)
	e.U32(o.Gid)
	e.Gfid(o.Gfid)
}

func (e *Enc) Setattr(in *layer.SetattrIn) {
	e.U32(in.Valid)
	e.U32(in.Mode)
	e.U32(in.Uid)
	e.U32(in.Gid)
	e.U64(in.Size)
	e.Time(in.Atime)
	e.Time(in.Mtime)
}

func (e *Enc) Lock(l layer.Lock) {
	e.U32(l.Type)
	e.U64(l.Start)
	e.U64(l.End)
	e.U32(l.Pid)
	e.Bool(l.Flock)
}

func (e *Enc) Statfs(s *layer.Statfs) {
	for _, v := range []uint64{s.Blocks, s.Bfree, s.Bavail, s.Files, s.Ffree} {
		e.U64(v)
	}
	e.U32(s.Bsize)
	e.U32(s.Frsize)
	e.U32(s.NameLen)
}

// DirPage encodes a listing; with targets (ReaddirTargets), each entry's
// symlink target follows its attributes.
func (e *Enc) DirPage(p *layer.DirPage, targets bool) {
	e.U64(p.Next)
	e.Bool(p.EOF)
	e.U32(uint32(len(p.Entries)))
	for i := range p.Entries {
		e.Str(p.Entries[i].Name)
		e.Attr(&p.Entries[i].Attr)
		if targets {
			e.Str(p.Entries[i].Target)
		}
	}
}

func (e *Enc) Strs(v []string) {
	e.U32(uint32(len(v)))
	for _, s := range v {
		e.Str(s)
	}
}

// LookupData encodes the answer of OpLookupData: the attributes, then
// whether the content follows, then the content. nil data is "not given";
// an empty file's content is given as empty, not nil.
func (e *Enc) LookupData(a *layer.Attr, data []byte) {
	e.Attr(a)
	e.Bool(data != nil)
	if data != nil {
		e.Bytes(data)
	}
}

// Dec reads fields written by Enc. The first error sticks: every later read
// returns zero values, so a decoder checks Err once at the end.
type Dec struct {
	B   []byte
	Err error
}

func (d *Dec) take(n int) []byte {
	if d.Err != nil {
		return nil
	}
	if n < 0 || n > len(d.B) {
		d.Err = ErrShort
		d.B = nil
		return nil
	}
	v := d.B[:n:n]
	d.B = d.B[n:]
	return v
}

func (d *Dec) U8() uint8 {
	if b := d.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *Dec) U16() uint16 {
	if b := d.take(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (d *Dec) U32() uint32 {
	if b := d.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (d *Dec) U64() uint64 {
	if b := d.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (d *Dec) I64() int64 { return int64(d.U64()) }

// Bool decodes a bool; only 0 and 1 are valid.
func (d *Dec) Bool() bool {
	v := d.U8()
	if v > 1 && d.Err == nil {
		d.Err = errors.New("wire: bad bool")
	}
	return v == 1
}

// Bytes returns a slice of the message (not a copy).
func (d *Dec) Bytes() []byte {
	n := d.U32()
	if d.Err == nil && n > MaxPayload {
		d.Err = ErrTooLong
		return nil
	}
	return d.take(int(n))
}

func (d *Dec) Str() string { return string(d.Bytes()) }

func (d *Dec) Gfid() (g layer.Gfid) {
	copy(g[:], d.take(16))
	return g
}

func (d *Dec) Time() layer.Timespec {
	return layer.Timespec{Sec: d.I64(), Nsec: d.U32()}
}

func (d *Dec) Attr() (a layer.Attr) {
	a.Gfid = d.Gfid()
	a.Mode = d.U32()
	a.Nlink = d.U32()
	a.Uid = d.U32()
	a.Gid = d.U32()
	a.Rdev = d.U64()
	a.Size = d.U64()
	a.Blocks = d.U64()
	a.Blksize = d.U32()
	a.Atime = d.Time()
	a.Mtime = d.Time()
	a.Ctime = d.Time()
	a.Linkto = d.Str()
	a.Pending = d.U64()
	return a
}

func (d *Dec) Owner() layer.Owner {
	return layer.Owner{Uid: d.U32(), Gid: d.U32(), Gfid: d.Gfid()}
}

func (d *Dec) Setattr() (in layer.SetattrIn) {
	in.Valid = d.U32()
	in.Mode = d.U32()
	in.Uid = d.U32()
	in.Gid = d.U32()
	in.Size = d.U64()
	in.Atime = d.Time()
	in.Mtime = d.Time()
	return in
}

func (d *Dec) Lock() layer.Lock {
	return layer.Lock{Type: d.U32(), Start: d.U64(), End: d.U64(), Pid: d.U32(), Flock: d.Bool()}
}

func (d *Dec) Statfs() (s layer.Statfs) {
	s.Blocks, s.Bfree, s.Bavail, s.Files, s.Ffree = d.U64(), d.U64(), d.U64(), d.U64(), d.U64()
	s.Bsize, s.Frsize, s.NameLen = d.U32(), d.U32(), d.U32()
	return s
}

// minEntry is the smallest encoding of a directory entry; it bounds the
// entry count a message can claim before anything is allocated.
const minEntry = 4 + 16 + 4*4 + 8*3 + 4 + 3*12 + 4

// DirPage decodes a listing, encoded with targets or without.
func (d *Dec) DirPage(targets bool) (p layer.DirPage) {
	p.Next = d.U64()
	p.EOF = d.Bool()
	n := d.U32()
	if d.Err != nil || uint64(n)*minEntry > uint64(len(d.B)) {
		if d.Err == nil {
			d.Err = ErrShort
		}
		return p
	}
	p.Entries = make([]layer.Entry, 0, n)
	for i := uint32(0); i < n && d.Err == nil; i++ {
		e := layer.Entry{Name: d.Str(), Attr: d.Attr()}
		if targets {
			e.Target = d.Str()
		}
		p.Entries = append(p.Entries, e)
	}
	return p
}

func (d *Dec) Strs() []string {
	n := d.U32()
	if d.Err != nil || uint64(n)*4 > uint64(len(d.B)) {
		if d.Err == nil {
			d.Err = ErrShort
		}
		return nil
	}
	out := make([]string, 0, min(n, math.MaxUint16))
	for i := uint32(0); i < n && d.Err == nil; i++ {
		out = append(out, d.Str())
	}
	return out
}

// heldLocks decodes the locks of an OpLeaseReturn (at most MaxLeaseLocks).
func (d *Dec) heldLocks() []layer.HeldLock {
	n := d.U32()
	if d.Err == nil && (n > MaxLeaseLocks || uint64(n)*34 > uint64(len(d.B))) {
		d.Err = ErrShort
	}
	if d.Err != nil || n == 0 {
		return nil
	}
	out := make([]layer.HeldLock, 0, n)
	for i := uint32(0); i < n && d.Err == nil; i++ {
		h := layer.HeldLock{Owner: d.U64(), Lock: d.Lock()}
		h.Lock.Domain = d.U8()
		out = append(out, h)
	}
	return out
}

// LookupData decodes what Enc.LookupData wrote. The content aliases the
// message; it is nil when not given, and never nil when given.
func (d *Dec) LookupData() (layer.Attr, []byte) {
	a := d.Attr()
	if !d.Bool() {
		return a, nil
	}
	data := d.Bytes()
	if data == nil && d.Err == nil {
		data = []byte{}
	}
	return a, data
}

// Done reports the decoding error, or an error if bytes are left over.
func (d *Dec) Done() error {
	if d.Err == nil && len(d.B) != 0 {
		d.Err = errors.New("wire: trailing bytes in message")
	}
	return d.Err
}
