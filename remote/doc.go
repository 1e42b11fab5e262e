// Package remote moves branches between an art store and a remote: another
// store file, or a prefix of an S3-compatible bucket.
//
// A Remote holds content-addressed objects (chunks, manifests, trees in
// their stored, possibly compressed form, see cas.Raw) and refs (branch name
// -> root tree id, with a compare-and-swap version and the branch's earlier
// roots). Push and Pull negotiate by object id: the root is compared first,
// then only subtrees the other side lacks are walked, so an unchanged
// subtree costs nothing below its id and a no-op push costs one ref read.
//
// Invariants:
//   - Closure: when a remote holds an object it holds everything the object
//     refers to. Push sends in post-order (children before parents, packs
//     one after the other), and a store receives a pull in one transaction,
//     so an interrupted transfer never leaves a parent without its children
//     and a rerun can trust "has" to skip whole subtrees.
//   - Nothing unverified lands: every received object is checked by
//     cas.CheckRaw (bounded inflation, hash, canonical decoding, safe names)
//     before it is stored, and a branch moves only after its whole state is
//     in the store. A bad object fails the pull with an error naming it and
//     rolls the store back.
//   - Refs move by compare-and-swap: a file remote compares the branch's head
//     hash inside a write transaction; S3 uses conditional writes (If-Match
//     on the ETag read, If-None-Match: * to create). Objects are immutable,
//     so concurrent pushers never lose each other's objects; the loser of a
//     ref race gets ErrRefChanged and reruns.
//   - Objects are deleted only by GC (gc.go), never while a ref or an
//     offered object needs them. A store file is collected in one
//     transaction and a push whose Has answers predate it is refused
//     (journal.ErrGCRaced) and rerun. On S3 a round first condemns packs
//     with a marker (readers then treat what only those packs hold as
//     absent), and deletes them only after a grace period, once a fresh
//     walk from the refs and from every pack written since shows nothing
//     needs them; a push that finds a round it did not know about when it
//     loaded the indexes starts over (journal.ErrGCRaced).
//
// On S3 the layout under PREFIX is (see docs/remotes.md):
//
//	PREFIX/refs/BRANCH          JSON: root id and earlier roots
//	PREFIX/packs/NAME.pack      stored objects, concatenated
//	PREFIX/packs/NAME.idx       index of NAME.pack; written after it, so an
//	                            index names a complete pack. NAME = BLAKE3
//	                            of the index bytes. gc deletes it before
//	                            the pack.
//	PREFIX/packs/gc.json        the gc round marker (gc.go)
//
// In packs a tree may be a delta against the tree at the same path in the
// remote's previous state (delta.go); readers resolve bases first, locally
// when they can, and chains are at most maxDeltaDepth long.
//
// Known limits: event chains are store-local (an event's hash covers the
// store's global sequence number and op ids), so what moves is states:
// a pull appends one checkout event per branch, and history on the receiving
// side is the sequence of pulls. A remote's pack indexes are read in full by
// each push or pull that needs objects (about 45 bytes per object).
package remote
