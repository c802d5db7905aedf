package sim

import (
	"errors"
	"fmt"
	"syscall"
)

// model is what the clients were told: the content of every file whose
// state is known, and the paths whose state is not (an operation on them
// failed part way: old, new or in between are all right, as long as
// every copy agrees after heal).
type model struct {
	files  map[string][]byte
	unsure map[string]bool
}

func newModel() *model {
	return &model{files: map[string][]byte{}, unsure: map[string]bool{}}
}

// known reports whether path's state is known, and if so whether the file
// exists.
func (m *model) known(path string) (exists, known bool) {
	if m.unsure[path] {
		return false, false
	}
	_, exists = m.files[path]
	return exists, true
}

func (m *model) set(path string, data []byte) {
	m.files[path] = data
	delete(m.unsure, path)
}

func (m *model) remove(path string) {
	delete(m.files, path)
	delete(m.unsure, path)
}

func (m *model) doubt(paths ...string) {
	for _, p := range paths {
		delete(m.files, p)
		m.unsure[p] = true
	}
}

// pwrite is the content of old after writing p at off.
func pwrite(old []byte, p []byte, off int) []byte {
	out := append([]byte(nil), old...)
	if end := off + len(p); end > len(out) {
		out = append(out, make([]byte, end-len(out))...)
	}
	copy(out[off:], p)
	return out
}

// truncated is old cut or extended (with zeros) to size.
func truncated(old []byte, size int) []byte {
	out := append([]byte(nil), old...)
	if size <= len(out) {
		return out[:size]
	}
	return append(out, make([]byte, size-len(out))...)
}

// unavailable reports whether err only says the volume could not answer
// now (bricks down or cut off), which faults allow; any other error, or a
// wrong answer, is a violation.
func unavailable(err error) bool {
	for _, e := range []syscall.Errno{syscall.ENOTCONN, syscall.EIO, syscall.EROFS, syscall.ETIMEDOUT,
		syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EPIPE, syscall.ESTALE, syscall.EAGAIN} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// violation is a run's finding: what a client was told that the model
// says is wrong, or bricks that heal did not make agree.
type violation struct{ msg string }

func (v *violation) Error() string { return v.msg }

func violated(format string, args ...any) error {
	return &violation{fmt.Sprintf(format, args...)}
}
