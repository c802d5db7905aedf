package api

import (
	"errors"
	"fmt"
)

// Marker errors. Every error the management API returns for a refused
// request wraps one of these, on the server and, after a round trip, in the
// Client, so callers can test them with errors.Is.
var (
	// ErrInvalid: the request is malformed or names something unusable.
	ErrInvalid = errors.New("invalid request")
	// ErrNotFound: no such volume.
	ErrNotFound = errors.New("not found")
	// ErrExists: a volume of that name already exists.
	ErrExists = errors.New("already exists")
	// ErrState: the volume is not in a state that allows the operation
	// (for example deleting a started volume).
	ErrState = errors.New("wrong state")
	// ErrUnsupported: a feature mortar does not have yet.
	ErrUnsupported = errors.New("not supported yet")
	// ErrNoQuorum: the cluster has no leader (fewer than a majority of
	// its nodes reach each other), so its state cannot change now.
	ErrNoQuorum = errors.New("no quorum")
	// ErrForbidden: the client's certificate may not do this.
	ErrForbidden = errors.New("forbidden")
	// ErrUnauthenticated: the caller did not prove who it is (the
	// cluster secret or a certificate) where that is required.
	ErrUnauthenticated = errors.New("unauthenticated")
)

// markers lists the marker errors with the names used for them on the wire.
var markers = []struct {
	name string
	err  error
}{
	{"invalid", ErrInvalid},
	{"not-found", ErrNotFound},
	{"exists", ErrExists},
	{"state", ErrState},
	{"unsupported", ErrUnsupported},
	{"no-quorum", ErrNoQuorum},
	{"forbidden", ErrForbidden},
	{"unauthenticated", ErrUnauthenticated},
}

// markedError is an error whose message is written for the operator and
// that matches a marker (and optionally a cause) with errors.Is.
type markedError struct {
	msg    string
	marker error
	cause  error
}

func (e *markedError) Error() string { return e.msg }

func (e *markedError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.marker}
	}
	return []error{e.marker, e.cause}
}

// Errorf returns an error with the formatted message that matches marker.
// A %w verb in format also makes the error match its argument.
func Errorf(marker error, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &markedError{msg: err.Error(), marker: marker, cause: errors.Unwrap(err)}
}

// MarkerName returns the wire name of the marker err matches, or "".
func MarkerName(err error) string {
	for _, m := range markers {
		if errors.Is(err, m.err) {
			return m.name
		}
	}
	return ""
}

// markerByName returns the marker error with the given wire name, or nil.
func markerByName(name string) error {
	for _, m := range markers {
		if m.name == name {
			return m.err
		}
	}
	return nil
}
