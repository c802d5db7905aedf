package layer

import "context"

// DataLooker is a layer that can answer a lookup with the content of a
// small regular file as well, so that an open for reading right after the
// lookup and its reads need no round trip of their own (GlusterFS's
// quick-read). The network client, replicate and distribute implement
// it; disperse implements it for files of at most one chunk (from the
// first data brick's fragment: FragmentLooker), crypt does not
// (ciphertext), and a layer that does not simply answers lookups.
type DataLooker interface {
	// LookupData is Lookup, and also returns the content of the inode at
	// path if it is a regular file of at most max bytes whose content
	// the layer can vouch for: the content at the time of the returned
	// attributes. nil content means "not given": the caller opens and
	// reads as usual. An empty file's content is empty, not nil.
	LookupData(ctx context.Context, path string, max int) (Attr, []byte, error)
}

// LookupData asks l for the attributes of path and, if l is a
// DataLooker, the content of a small regular file (nil if not given).
func LookupData(ctx context.Context, l Layer, path string, max int) (Attr, []byte, error) {
	if dl, ok := l.(DataLooker); ok {
		return dl.LookupData(ctx, path, max)
	}
	a, err := l.Lookup(ctx, path)
	return a, nil, err
}

// FragmentLooker is a layer that can answer a lookup with a small file as
// it lies on the brick (the network client): a disperse fragment, whose
// length is not the file size the attributes report.
type FragmentLooker interface {
	// LookupFragment is Lookup, and also returns the bytes of the
	// regular file at path as stored, whole, if there are at most max of
	// them and the file did not change while they were read (nil: not
	// given).
	LookupFragment(ctx context.Context, path string, max int) (Attr, []byte, error)
}
