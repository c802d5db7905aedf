package wire

import (
	"errors"

	"github.com/mortarfs/mortar/layer"
)

// A KindNotify frame's payload is a count and that many changes, each a
// path and a flags byte (changeEntry, changeAll).
const (
	changeEntry = 1 << iota
	changeAll
)

// MaxChanges bounds the changes of one KindNotify frame.
const MaxChanges = 256

// EncodeChanges encodes the payload of a KindNotify frame.
func EncodeChanges(e *Enc, cs []layer.Change) {
	e.U32(uint32(len(cs)))
	for _, c := range cs {
		e.Str(c.Path)
		var f uint8
		if c.Entry {
			f |= changeEntry
		}
		if c.All {
			f |= changeAll
		}
		e.U8(f)
	}
}

// DecodeChanges decodes what EncodeChanges wrote.
func DecodeChanges(b []byte) ([]layer.Change, error) {
	d := Dec{B: b}
	n := d.U32()
	if n > MaxChanges {
		return nil, errors.New("wire: too many changes in a notice")
	}
	out := make([]layer.Change, 0, n)
	for i := uint32(0); i < n && d.Err == nil; i++ {
		c := layer.Change{Path: d.Str()}
		f := d.U8()
		c.Entry, c.All = f&changeEntry != 0, f&changeAll != 0
		out = append(out, c)
	}
	return out, d.Done()
}
