// Package cas is art's content-addressed object store.
//
// Every object is addressed by the BLAKE3-256 hash of its canonical,
// uncompressed bytes (ID). Three kinds exist:
//
//   - chunk: raw file bytes, cut by a content-defined chunker (FastCDC-style
//     gear hash; min 4 KiB, average 16 KiB, max 64 KiB) so that an edit moves
//     only the chunks around it.
//   - manifest: the ordered extents of one file's content (chunk id and
//     length, or a hole), see Manifest.
//   - tree: the sorted entries of one directory, see Tree. Trees form a Merkle
//     DAG: a root tree id is the identity of a whole state.
//
// Objects live in one SQLite table (created by package migrations, see
// ObjectsSchema):
//
//	objects(rowid, id BLOB UNIQUE, kind INTEGER, codec INTEGER, size INTEGER, data BLOB,
//	        pack INTEGER, pack_off INTEGER, pack_len INTEGER)
//
// data is zstd-compressed when that saves at least 5% (codec 1), else raw
// (codec 0). A Store made with NewPackedStore keeps the stored bytes of
// large chunks out of SQLite, appended to a pack file (see Packs), and the
// row names their range; the row is the only index and SQLite's commit the
// only commit point, the pack bytes being written and synced first. Every read decompresses (bounded by size, so a decompression bomb
// is refused), re-hashes and returns a *CorruptError naming the object on any
// mismatch: a caller never sees wrong bytes. Manifests and trees have one
// canonical encoding each; their decoders accept nothing else and never
// allocate from an untrusted count, so objects from a remote can be decoded
// safely. docs/store-format.md describes every byte.
//
// The package imports no other art package but internal/errclass (the
// error classes). It works on any DBTX (a *sql.DB
// or a *sql.Tx), so callers decide transaction boundaries. A Store is safe
// for concurrent use; PutFile and ReadFile use GOMAXPROCS worker goroutines
// for files of several chunks (compressing on the way in, inflating and
// verifying ahead of the reader on the way out), all finished before they
// return.
//
// Known failure modes: a file whose manifest would pass 64 MiB (about 30 GiB
// of content) or a directory whose tree would fails with ErrTooLarge; a write
// that fails part-way leaves unreferenced chunks behind (harmless, and
// reclaimable by a collector that walks the roots); interrupting a statement
// by cancelling ctx inside a caller's transaction rolls that transaction back
// (SQLite's rule), so treat a cancelled Put as a failed transaction.
package cas
