package wire

import (
	"fmt"

	"github.com/mortarfs/mortar/internal/proof"
	"github.com/mortarfs/mortar/layer"
)

// Version is the protocol version a client offers in its handshake; a
// brick also takes clients of MinVersion and later. Version 5 added lock
// leases (a Setlk's Flags, OpLeaseReturn, KindRecall frames): a version 4
// client sends Setlk without Flags, asks for no lease and so gets no
// recall. Version 6 added directory leases (a Mkdir's Flags, OpMake,
// OpDirLeaseReturn, KindRecallDir frames): an older client sends Mkdir
// without Flags and so is never granted one. Version 7 added OpWriteGap
// (layer.GapWriter), which only version 7 clients send. Version 8 added a
// Make's Size (a disperse fragment made in one go records its file's
// size) and a LookupData's Flags (LookupFragment); an older client's carry
// none. Version 9 added OpGoodbye: a client that ends a connection cleanly
// says so first, and a brick of a replicated set marks the directories
// whose names a version 9 client's connection changed last when it ends
// without one (an older client's never). Version 10 added OpRemoved,
// which a healer or a listing of merged directory copies sends; a brick
// of an earlier version refuses it, and the names are merged as before.
// Version 11 added a Readdir's Flags (ReaddirTargets): an older client's
// carry none, and its answers no symlink targets. Version 12 added
// FlagKeepUndo and OpReadUndo (layer.UndoReader), which only version 12
// clients send. Version 13 added a Rename's Gfid (layer.SourceRenamer):
// an older client's carry none, and name no inode. Version 14 added a
// Handshake's Cookie (the layout generation, below): an older client's
// carry none, and its names are admitted as the layout-less ones.
const (
	Version    = 14
	MinVersion = 4
)

// addedSince are the fields at the end of an operation's schema that
// clients of earlier versions do not send: decoded as zero when absent.
var addedSince = map[uint8]field{OpSetlk: fFlags, OpMkdir: fFlags, OpDropHealEntry: fPath, OpMake: fSize, OpLookupData: fFlags, OpReaddir: fFlags, OpRename: fGfid, OpHandshake: fCookie}

// ReaddirTargets, in a Readdir's Flags, asks for each entry's symlink
// target (layer.Entry.Target) after its attributes in the answer.
const ReaddirTargets uint32 = 1

// The handshake: after Magic, the client sends a Handshake request naming
// the volume and the brick (Proof empty); the brick answers it with
// ChallengeSize random bytes as the answer's payload (or refuses, EACCES
// and a message); the client sends the Handshake again, with Proof =
// HandshakeProof(volume secret, ...) over that challenge; the brick admits
// it (an empty answer) or refuses it. The volume's secret never crosses
// the network, and a proof is good for its one challenge only.
//
// A Handshake's Cookie is the client's layout generation: the version of
// the volume spec whose layout its graph places names by (0: it places
// none by a layout, as a healer, which makes names where the other copies
// have them). A brick refuses operations that make names (layer.ErrFenced)
// to a connection whose generation is below the volume's fence, which the
// cluster raises once its clients have taken a new layout and before a
// rebalance moves files: a client cut off from the cluster meanwhile
// cannot make files where the old layout put them, behind the rebalance.
const ChallengeSize = 32

// HandshakeProof is the proof, for a brick's challenge, that the client
// holds secret, the volume's secret.
func HandshakeProof(secret, volumeID, brickID string, challenge []byte) []byte {
	return proof.MAC(secret, "mortar-brick", volumeID, brickID, string(challenge))
}

// ValidProof reports, in constant time, whether p is HandshakeProof of
// the same arguments.
func ValidProof(p []byte, secret, volumeID, brickID string, challenge []byte) bool {
	return proof.Valid(p, secret, "mortar-brick", volumeID, brickID, string(challenge))
}

// Operations.
const (
	OpHandshake uint8 = iota + 1
	OpLookup
	OpSetattr
	OpMknod
	OpMkdir
	OpSymlink
	OpReadlink
	OpUnlink
	OpRmdir
	OpRename
	OpLink
	OpCreate
	OpOpen
	OpReaddir
	OpStatfs
	OpGetxattr
	OpSetxattr
	OpListxattr
	OpRemovexattr
	OpRead
	OpWrite
	OpFgetattr
	OpFsetattr
	OpFsync
	OpFallocate
	OpFlush
	OpGetlk
	OpSetlk
	OpRelease
	OpHealIndex
	OpMarkPending
	OpClearPending
	OpDropHealEntry
	OpEntrylk
	OpLookupData
	OpWatch
	OpUnlinkData
	OpLeaseReturn
	OpMake
	OpDirLeaseReturn
	OpWriteGap
	OpGoodbye
	OpRemoved
	OpReadUndo
	opMax
)

var opNames = [...]string{"", "handshake", "lookup", "setattr", "mknod", "mkdir", "symlink",
	"readlink", "unlink", "rmdir", "rename", "link", "create", "open", "readdir", "statfs",
	"getxattr", "setxattr", "listxattr", "removexattr", "read", "write", "fgetattr",
	"fsetattr", "fsync", "fallocate", "flush", "getlk", "setlk", "release",
	"healindex", "markpending", "clearpending", "drophealentry", "entrylk", "lookupdata", "watch", "unlinkdata",
	"leasereturn", "make", "dirleasereturn", "writegap", "goodbye", "removed", "readundo"}

// OpName names an operation for logs and metrics.
func OpName(op uint8) string {
	if int(op) < len(opNames) && op != 0 {
		return opNames[op]
	}
	return fmt.Sprintf("op%d", op)
}

// Request holds the arguments of any request; which fields an operation
// uses is given by its schema below, the single source of both encoding and
// decoding.
type Request struct {
	Op        uint8
	Path      string
	Path2     string // rename and link target
	Name      string // xattr name
	Flags     uint32
	Fh        uint64
	Off       int64
	Len       int64
	Mode      uint32
	Owner     layer.Owner
	Setattr   layer.SetattrIn
	Rdev      uint64
	Linkto    string
	Target    string // symlink target
	Cookie    uint64
	Max       uint32
	LockOwner uint64
	Lock      layer.Lock
	Wait      bool
	Value     []byte // xattr value
	VolumeID  string
	BrickID   string
	Version   uint32
	// Pending is replicate's Txn.Pending for modifying operations, and
	// the mask of MarkPending and ClearPending.
	Pending uint64
	// Size is the Txn's size for disperse fragments, plus one (0: none).
	Size  uint64
	Gfid  layer.Gfid
	Ctime layer.Timespec
	// Proof answers the brick's challenge in the second handshake
	// (HandshakeProof).
	Proof []byte
	// Locks are the locks a client returns with a lease (OpLeaseReturn).
	Locks []layer.HeldLock
	// Gap is the range an OpWriteGap leaves as it is (layer.GapWriter).
	Gap layer.Gap
	// Data is the raw tail of a write request (not part of its schema:
	// see DataFollows), and the content of a file made in one go (OpMake,
	// where it is).
	Data []byte
	// KeepUndo is a write's FlagKeepUndo (the frame header's, not part of
	// its schema).
	KeepUndo bool
}

// Flags of OpEntrylk: a healer holds a directory's names still on a
// brick while it heals them (see the brick package), then lets go; or
// takes the brick's heal lease (layer.HealLeaser), which says which of
// the healers of the brick's set heals it, then lets it go.
const (
	EntrylkUnlock uint32 = iota
	EntrylkLock
	EntrylkLease
	EntrylkUnlease
)

// Flags of OpWatch: a client asks its brick to tell it (KindNotify
// frames) what other connections change, for its caches to forget, or to
// stop.
const (
	WatchOff uint32 = iota
	WatchOn
)

// Flags of OpSetlk: SetlkLease says the client can hold a lease of the
// inode's POSIX locks (layer.LockLeaser); the brick's answer is then the
// lease's id (u64) when it granted one, else empty. The brick recalls a
// lease with a KindRecall frame.
const SetlkLease uint32 = 1

// Flags of OpLeaseReturn: LeaseKeep returns a lease the client did not
// know of (a recall of it came first): the brick's locks stand. Without
// it, Locks are the locks held through the file, owners as in requests.
const LeaseKeep uint32 = 1

// MaxLeaseLocks bounds the locks one OpLeaseReturn carries.
const MaxLeaseLocks = 4096

// Flags of OpMkdir: MkdirLease asks the brick to lease the new
// directory's names to the client (layer.NameLeaser): the answer is then
// the attributes followed by the lease's id (u64) when the brick granted
// one. The brick recalls a directory lease with a KindRecallDir frame; the
// client sends what it holds back in the directory, then OpDirLeaseReturn.
const MkdirLease uint32 = 1

// Flags of OpLookupData: LookupFragment asks for the file as it lies on
// the brick, whole, if it is at most Max bytes long — a disperse fragment
// (layer.FragmentLooker), whose length is not the file size the attributes
// report (version 8).
const LookupFragment uint32 = 1

// WriteHead is the size of a write request's fields (fh, offset, pending,
// size), which come before its data; WriteGapHead, of OpWriteGap's (the
// same and the gap).
const (
	WriteHead    = 32
	WriteGapHead = WriteHead + 8
)

// DataFollows says whether op's data is the raw tail of its request,
// after head bytes of fields: the brick reads it into a buffer of its own,
// aligned for direct I/O.
func DataFollows(op uint8) (head int, ok bool) {
	switch op {
	case OpWrite:
		return WriteHead, true
	case OpWriteGap:
		return WriteGapHead, true
	}
	return 0, false
}

type field uint8

const (
	fPath field = iota
	fPath2
	fName
	fFlags
	fFh
	fOff
	fLen
	fMode
	fOwner
	fSetattr
	fRdev
	fLinkto
	fTarget
	fCookie
	fMax
	fLockOwner
	fLock
	fWait
	fValue
	fVolume
	fBrick
	fVersion
	fPending
	fGfid
	fCtime
	fSize
	fProof
	fLockDomain
	fLocks
	fData
	fGap
)

var schema = [opMax][]field{
	OpHandshake:     {fVersion, fVolume, fBrick, fProof, fCookie}, // Cookie: the layout generation (version 14)
	OpLookup:        {fPath},
	OpSetattr:       {fPath, fSetattr, fPending, fSize},
	OpMknod:         {fPath, fOwner, fMode, fRdev, fLinkto, fPending},
	OpMkdir:         {fPath, fOwner, fMode, fPending, fFlags}, // Flags: MkdirLease
	OpSymlink:       {fPath, fOwner, fTarget, fPending},
	OpReadlink:      {fPath},
	OpUnlink:        {fPath, fPending},
	OpRmdir:         {fPath, fPending},
	OpRename:        {fPath, fPath2, fFlags, fPending, fGfid}, // Gfid: the inode moved (version 13; zero: not named)
	OpLink:          {fPath, fPath2, fPending},
	OpCreate:        {fPath, fOwner, fFlags, fMode, fPending},
	OpOpen:          {fPath, fFlags},
	OpReaddir:       {fPath, fCookie, fMax, fFlags}, // Flags: ReaddirTargets
	OpStatfs:        {fPath},
	OpGetxattr:      {fPath, fName},
	OpSetxattr:      {fPath, fName, fValue, fFlags, fPending},
	OpListxattr:     {fPath},
	OpRemovexattr:   {fPath, fName, fPending},
	OpRead:          {fFh, fOff, fLen},
	OpWrite:         {fFh, fOff, fPending, fSize}, // data follows
	OpFgetattr:      {fFh},
	OpFsetattr:      {fFh, fSetattr, fPending, fSize},
	OpFsync:         {fFh, fFlags},
	OpFallocate:     {fFh, fMode, fOff, fLen, fPending},
	OpFlush:         {fFh, fLockOwner},
	OpGetlk:         {fFh, fLockOwner, fLock, fLockDomain},
	OpSetlk:         {fFh, fLockOwner, fLock, fWait, fLockDomain, fFlags},
	OpRelease:       {fFh},
	OpHealIndex:     {fGfid, fMax},
	OpMarkPending:   {fPath, fGfid, fPending},
	OpClearPending:  {fPath, fGfid, fPending, fCtime},
	OpDropHealEntry: {fGfid, fPath},        // Path: drop only an entry that records it (version 6)
	OpEntrylk:       {fPath, fFlags},       // Flags: EntrylkLock, EntrylkUnlock, EntrylkLease or EntrylkUnlease
	OpLookupData:    {fPath, fMax, fFlags}, // answer: EncodeLookupData; Flags: LookupFragment
	OpWatch:         {fFlags},              // Flags: WatchOn or WatchOff
	OpUnlinkData:    {fPath, fPending},
	OpLeaseReturn:   {fFh, fCookie, fFlags, fLocks},
	// OpMake creates, writes Data at offset 0 and changes Setattr in one
	// request (layer.CreateIn's Data and Set); answered as OpCreate. Size
	// is the file size a disperse fragment records (version 8).
	OpMake:           {fPath, fOwner, fFlags, fMode, fPending, fSetattr, fData, fSize},
	OpDirLeaseReturn: {fCookie}, // Cookie: the lease's id
	// OpWriteGap writes its data around Gap, which it leaves as it is
	// (layer.GapWriter); data follows.
	OpWriteGap: {fFh, fOff, fPending, fSize, fGap},
	// OpGoodbye: the client ends the connection cleanly, with nothing
	// under way (version 9).
	OpGoodbye: {},
	// OpRemoved lists the removal records of a directory
	// (layer.HealStore.Removed; version 10); answer: their count (u32),
	// then each one's gfid and name.
	OpRemoved: {fPath},
	// OpReadUndo reads the open file's undo copy (layer.UndoReader;
	// version 12), answered as OpRead.
	OpReadUndo: {fFh, fOff, fLen},
}

// Encode appends the request's schema fields (not Data) to e.
func (r *Request) Encode(e *Enc) {
	for _, f := range schema[r.Op] {
		switch f {
		case fPath:
			e.Str(r.Path)
		case fPath2:
			e.Str(r.Path2)
		case fName:
			e.Str(r.Name)
		case fFlags:
			e.U32(r.Flags)
		case fFh:
			e.U64(r.Fh)
		case fOff:
			e.I64(r.Off)
		case fLen:
			e.I64(r.Len)
		case fMode:
			e.U32(r.Mode)
		case fOwner:
			e.Owner(r.Owner)
		case fSetattr:
			e.Setattr(&r.Setattr)
		case fRdev:
			e.U64(r.Rdev)
		case fLinkto:
			e.Str(r.Linkto)
		case fTarget:
			e.Str(r.Target)
		case fCookie:
			e.U64(r.Cookie)
		case fMax:
			e.U32(r.Max)
		case fLockOwner:
			e.U64(r.LockOwner)
		case fLock:
			e.Lock(r.Lock)
		case fWait:
			e.Bool(r.Wait)
		case fValue:
			e.Bytes(r.Value)
		case fVolume:
			e.Str(r.VolumeID)
		case fBrick:
			e.Str(r.BrickID)
		case fVersion:
			e.U32(r.Version)
		case fPending:
			e.U64(r.Pending)
		case fGfid:
			e.Gfid(r.Gfid)
		case fCtime:
			e.Time(r.Ctime)
		case fSize:
			e.U64(r.Size)
		case fProof:
			e.Bytes(r.Proof)
		case fLockDomain: // Lock's own encoding predates its Domain
			e.U8(r.Lock.Domain)
		case fLocks:
			e.U32(uint32(len(r.Locks)))
			for _, h := range r.Locks {
				e.U64(h.Owner)
				e.Lock(h.Lock)
				e.U8(h.Lock.Domain)
			}
		case fData:
			e.Bytes(r.Data)
		case fGap:
			e.U32(r.Gap.At)
			e.U32(r.Gap.Len)
		}
	}
}

// DecodeRequest decodes the payload of a request frame. Byte fields (Value,
// Data) alias payload.
func DecodeRequest(op uint8, payload []byte) (*Request, error) {
	if op == 0 || op >= opMax {
		return nil, fmt.Errorf("wire: unknown operation %d", op)
	}
	r := &Request{Op: op}
	d := Dec{B: payload}
	for _, f := range schema[op] {
		if tail, ok := addedSince[op]; ok && f == tail && len(d.B) == 0 && d.Err == nil {
			break
		}
		r.decodeField(&d, f)
	}
	if _, ok := DataFollows(op); ok && d.Err == nil {
		r.Data, d.B = d.B, nil
	}
	if err := d.Done(); err != nil {
		return nil, fmt.Errorf("%s request: %w", OpName(op), err)
	}
	return r, nil
}

func (r *Request) decodeField(d *Dec, f field) {
	switch f {
	case fPath:
		r.Path = d.Str()
	case fPath2:
		r.Path2 = d.Str()
	case fName:
		r.Name = d.Str()
	case fFlags:
		r.Flags = d.U32()
	case fFh:
		r.Fh = d.U64()
	case fOff:
		r.Off = d.I64()
	case fLen:
		r.Len = d.I64()
	case fMode:
		r.Mode = d.U32()
	case fOwner:
		r.Owner = d.Owner()
	case fSetattr:
		r.Setattr = d.Setattr()
	case fRdev:
		r.Rdev = d.U64()
	case fLinkto:
		r.Linkto = d.Str()
	case fTarget:
		r.Target = d.Str()
	case fCookie:
		r.Cookie = d.U64()
	case fMax:
		r.Max = d.U32()
	case fLockOwner:
		r.LockOwner = d.U64()
	case fLock:
		r.Lock = d.Lock()
	case fWait:
		r.Wait = d.Bool()
	case fValue:
		r.Value = d.Bytes()
	case fVolume:
		r.VolumeID = d.Str()
	case fBrick:
		r.BrickID = d.Str()
	case fVersion:
		r.Version = d.U32()
	case fPending:
		r.Pending = d.U64()
	case fGfid:
		r.Gfid = d.Gfid()
	case fCtime:
		r.Ctime = d.Time()
	case fSize:
		r.Size = d.U64()
	case fProof:
		r.Proof = d.Bytes()
	case fLockDomain:
		r.Lock.Domain = d.U8()
	case fLocks:
		r.Locks = d.heldLocks()
	case fData:
		r.Data = d.Bytes()
	case fGap:
		r.Gap.At, r.Gap.Len = d.U32(), d.U32()
	}
}
