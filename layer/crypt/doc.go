// Package crypt is encryption at rest: a client-side layer, stacked on top
// of distribute, that encrypts the contents of regular files before they
// leave the client. The bricks, and anyone who reads them, see ciphertext
// only; the volume key never leaves the clients.
//
// # What is encrypted
//
// The contents of regular files. Names, directories, symlink targets,
// extended attributes, owners, modes and times stay clear, and so does a
// file's size (to within its block layout). A volume is encrypted or not
// from its first start (the volume option "encryption"): files written
// without the layer cannot be read through it.
//
// # Keys
//
// The volume key is 32 random bytes (NewKey), given to every client as 64
// hex digits in a key file (mount -o key-file=PATH, client.Options.KeyFile)
// or in the environment variable MORTAR_VOLUME_KEY. Lose it and the files
// are lost. From it the layer derives (HKDF-SHA256) a key-wrapping key and
// a short key check. Every file has its own random 256-bit data key, kept
// in the file's header wrapped (AES-256-GCM) by the key-wrapping key.
//
// # On-disk format (version 1)
//
// A file with contents starts with a HeaderSize (76) byte header:
//
//	0   4   magic "MCRY"
//	4   1   version (1)
//	5   1   log2 of the block size (16: 64 KiB)
//	6   1   flags (1: sparse, the file may have holes)
//	7   1   zero
//	8   8   key check (tells a wrong volume key from a damaged header)
//	16  12  nonce of the key wrap
//	28  48  the file's data key, AES-256-GCM under the key-wrapping key
//	        (32 + 16-byte tag), associated data: bytes 0..16 and the
//	        file's gfid
//
// then its blocks: plaintext block i (BlockSize bytes, the last one
// shorter) is stored at HeaderSize + i*StoredBlock as a 12-byte random
// nonce, the AES-256-GCM ciphertext under the file's data key, and the
// 16-byte tag, with the block index (8 bytes, big-endian) as associated
// data. An empty file has no header at all: the first write makes one.
// The plaintext size follows from the stored size alone (see plainSize),
// so Lookup, Readdir and Getattr need no extra read.
//
// Nonces are random: a file key seals at most one block per write of a
// block, and 2^32 writes of one file (256 TiB at 64 KiB) keep the chance
// of a repeated nonce under 2^-32, NIST's bound for random GCM nonces. A
// new key is made whenever a file is truncated to zero.
//
// # What is detected
//
// A changed byte of a block or header, a block moved within its file, a
// block or header copied from another file (other key; the header is
// bound to the gfid), a whole file copied over another: reading fails
// with EIO (EACCES for a wrong volume key), never with wrong data, and
// the client logs why. Not detected: a file cut at a block boundary or
// rolled back to an older version of itself as a whole, and — in a file
// that has holes (flag sparse, set before the first write or truncation
// that leaves a block unwritten) — a block overwritten with zeros, which
// reads as a hole.
//
// # Holes, truncation, fallocate
//
// Blocks never written stay holes on the bricks (all zeros) and read as
// zeros in sparse files; writing past the end fills the rest of the old
// last block with encrypted zeros. Truncation re-encrypts the block that
// becomes the last one. Fallocate fails with EOPNOTSUPP.
//
// # Concurrency
//
// Writes to a file that cover a block only in part read, decrypt, change
// and re-encrypt it, under a lock per file that also keeps this client's
// reads from seeing half a block. The file's size is known from its last
// open, write or truncation here. Clients do not lock each other out:
// two clients writing the same file at the same time may lose each
// other's writes to a shared block (and a reader elsewhere may need a
// second read of a block caught half written, which Read does); appends
// (O_APPEND) read the size from the bricks every time.
package crypt
