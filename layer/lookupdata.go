package layer

import "context"

// DataLooker is a layer that can answer a lookup with the content of a
// small regular file as well, so that an open for reading right after the
// lookup and its reads need no round trip of their own (GlusterFS's
// quick-read). The network client, replicate and distribute implement
// it; disperse implements it without content (its children hold
// fragments), crypt does not (ciphertext), and a layer that does not
// simply answers lookups.
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
