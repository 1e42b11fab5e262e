// Package overlay serves one branch of an art store as a FUSE filesystem
// (go-fuse v2, inode-based).
//
// The store's projection is the whole merged view: the host workspace is
// captured into the branch (an incremental import) before mounting, so the
// filesystem never needs whiteouts or opaque markers, and every snapshot is
// self-contained even if the host directory later changes or disappears.
//
// Nodes carry the projection's art inode numbers, so a rename moves a node
// and open handles and cached lookups stay valid. Namespace and metadata
// operations are one journal transaction each, except unlinks of files the
// listing knows, which are answered first and journaled behind, in order
// (behind.go); directories keep their listings in memory (listing.go), so
// lookups of listed names and of names not there need no SQL. The kernel
// opens directories itself and caches their listings (readdir.go: no
// OPENDIR, READDIR served from numbered snapshots).
// A new or truncated file's content lives in memory while it is small and
// written from the start (up to 128 KiB); otherwise, and for a file opened
// for writing with existing content, in a private "upper" copy. Opens of a
// file with an upper copy (made at an open for writing for 64 KiB or more)
// are served by FUSE passthrough to it: the kernel reads, writes and maps
// the copy itself (passthrough.go; not in forensic mode or with a quota);
// other opens go through the daemon, which copies the content out at the
// first write. Reads of a file held only in the store are answered from
// the chunks they touch (file.go readStore) until 8 MiB of it were read,
// then from a copy. At flush, fsync and release a changed file - and a file open for
// writing by passthrough, whose writes the daemon does not see - is
// chunked, hashed and journaled in one transaction (coalesced per open
// file, never per write request), together with the mode, owner and mtime
// set while it was dirty. fsync returns only once that transaction is
// durable.
//
// Journal access goes through one journal.Batch (group commit): changes
// share a transaction that commits within 5 ms, and always before a
// close, fsync or unmount returns.
//
// Lock order: node.jmu (journaling of one file), then node.mu (its
// in-memory state), then the batch's lock (inside FS.tx). Code running
// inside a journal transaction never takes a node lock; it collects what
// it read and applies it afterwards. The daemon never touches its own
// mount.
package overlay
