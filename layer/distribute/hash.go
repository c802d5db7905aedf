package distribute

// hashName is the placement hash of a directory entry's name: 64-bit FNV-1a
// (offset basis 14695981039346656037, prime 1099511628211) over the name's
// bytes, then MurmurHash3's 64-bit finalizer (fmix64), folded to 32 bits by
// xoring the high and low halves. Plain FNV-1a barely changes its top bits
// when only the last byte of a name changes ("file-1", "file-2", ...), and
// layouts cut the hash space by its top bits, so it put 60% of such names
// on one of three children; the finalizer spreads every input bit over all
// output bits. The hash depends on nothing but the bytes of the name, so
// every client, every process and every version of mortar places a name on
// the same child; changing it would strand every file written before, so it
// must never change (TestHashStable pins it).
//
// Like GlusterFS, names of the shape rsync and many editors use for
// temporary files, ".NAME.SUFFIX" with a SUFFIX free of dots, hash as NAME:
// the final rename(".foo.x7Gh2a" -> "foo") then stays on one child and
// leaves no pointer file behind.
func hashName(name string) uint32 {
	name = hashKey(name)
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= prime64
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return uint32(h>>32) ^ uint32(h)
}

// hashKey returns the part of name that is hashed: NAME for ".NAME.SUFFIX"
// (NAME non-empty, SUFFIX non-empty and without dots), name otherwise.
func hashKey(name string) string {
	if len(name) < 4 || name[0] != '.' {
		return name
	}
	dot := -1
	for i := len(name) - 1; i > 0; i-- {
		if name[i] == '.' {
			dot = i
			break
		}
	}
	if dot <= 1 || dot == len(name)-1 {
		return name
	}
	return name[1:dot]
}
