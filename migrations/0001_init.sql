-- art store, schema version 1. See docs/store-format.md.

-- Content-addressed objects (package cas). An ordinary rowid table with a
-- unique index on id: measured 2x faster than WITHOUT ROWID for blob rows.
CREATE TABLE objects (
    id    BLOB    NOT NULL,  -- BLAKE3-256 of the uncompressed bytes
    kind  INTEGER NOT NULL,  -- 1 chunk, 2 manifest, 3 tree
    codec INTEGER NOT NULL,  -- 0 raw, 1 zstd
    size  INTEGER NOT NULL,  -- uncompressed length
    data  BLOB    NOT NULL
);
CREATE UNIQUE INDEX objects_by_id ON objects(id);

-- Named heads. Scratch projections used while materializing a past state
-- have name NULL and live only inside one transaction.
CREATE TABLE branches (
    id          INTEGER PRIMARY KEY,
    name        TEXT UNIQUE,
    head_seq    INTEGER NOT NULL DEFAULT 0,  -- seq of the last event in this branch's chain
    head_hash   BLOB    NOT NULL,            -- hash of that event (zero id before the first)
    event_count INTEGER NOT NULL DEFAULT 0,  -- events in the chain: truncation is detectable
    next_ino    INTEGER NOT NULL DEFAULT 2,  -- art inode numbers are never reused on a branch
    created_ns  INTEGER NOT NULL,
    deleted_ns  INTEGER                      -- set by branch --delete; events stay
);

-- Operations: the unit users see in `art log` and undo (an import, a run, a
-- checkout, a snapshot...).
CREATE TABLE ops (
    id          INTEGER PRIMARY KEY,
    branch      INTEGER NOT NULL REFERENCES branches(id),
    kind        TEXT    NOT NULL,
    description TEXT    NOT NULL,
    before_seq  INTEGER NOT NULL,  -- branch head when the op began (0: empty branch)
    end_seq     INTEGER,           -- branch head when it ended; NULL while running
    start_ns    INTEGER NOT NULL,
    end_ns      INTEGER,
    status      INTEGER,           -- exit status for runs
    undoes      INTEGER            -- for undo ops: the op reverted
);
CREATE INDEX ops_by_branch ON ops(branch, id);

-- The journal: append-only, hash-chained per branch. payload is the canonical
-- encoding of the whole event body (see journal/event.go); kind, path and
-- root duplicate fields of it for queries and are checked by verify.
CREATE TABLE events (
    seq     INTEGER PRIMARY KEY,  -- global order across branches
    branch  INTEGER NOT NULL,
    op      INTEGER NOT NULL,
    kind    INTEGER NOT NULL,
    time_ns INTEGER NOT NULL,
    path    BLOB,                 -- primary path (relative to /home/agent), for log --path
    root    BLOB,                 -- state root after a reset event (branch, checkout, snapshot)
    payload BLOB    NOT NULL,
    prev    BLOB    NOT NULL,
    hash    BLOB    NOT NULL      -- BLAKE3(prev || uvarint(seq) || payload)
);
CREATE INDEX events_by_branch ON events(branch, seq);
CREATE INDEX events_by_path ON events(path, seq) WHERE path IS NOT NULL;
CREATE INDEX events_by_op ON events(op, seq);

-- Snapshots: named points of a chain. id is the hash of the snapshot event,
-- so it commits to the whole history before it.
CREATE TABLE snapshots (
    id          BLOB    PRIMARY KEY,
    seq         INTEGER NOT NULL UNIQUE,
    branch      INTEGER NOT NULL,
    root        BLOB    NOT NULL,
    message     TEXT    NOT NULL,
    time_ns     INTEGER NOT NULL,
    event_count INTEGER NOT NULL  -- chain length at this snapshot
);
CREATE INDEX snapshots_by_branch ON snapshots(branch, seq);

-- Projection: the live tree of each branch, derivable from the journal
-- (verify --rebuild). Directories are loaded lazily from tree objects:
-- state 0 = collapsed (children not loaded, target = tree id), 1 = loaded and
-- clean (target = its tree id), 2 = loaded and dirty (target stale).
CREATE TABLE nodes (
    branch     INTEGER NOT NULL,
    ino        INTEGER NOT NULL,
    kind       INTEGER NOT NULL,  -- cas.EntryKind
    mode       INTEGER NOT NULL,
    uid        INTEGER NOT NULL,
    gid        INTEGER NOT NULL,
    mtime_ns   INTEGER NOT NULL,
    ctime_ns   INTEGER NOT NULL,
    size       INTEGER NOT NULL,
    target     BLOB,              -- file: manifest id; dir: tree id; symlink: link text
    xattrs     BLOB,
    nlink      INTEGER NOT NULL,
    link_group INTEGER NOT NULL DEFAULT 0,
    parent     INTEGER NOT NULL DEFAULT 0,  -- directories: parent ino (the root is its own parent)
    state      INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (branch, ino)
) WITHOUT ROWID;
CREATE INDEX nodes_dirty ON nodes(branch, state) WHERE state = 2;

CREATE TABLE dentries (
    branch INTEGER NOT NULL,
    parent INTEGER NOT NULL,
    name   BLOB    NOT NULL,
    ino    INTEGER NOT NULL,
    PRIMARY KEY (branch, parent, name)
) WITHOUT ROWID;
CREATE INDEX dentries_by_ino ON dentries(branch, ino);

CREATE TABLE link_groups (
    branch INTEGER NOT NULL,
    grp    INTEGER NOT NULL,
    ino    INTEGER NOT NULL,
    PRIMARY KEY (branch, grp)
) WITHOUT ROWID;

-- Host import stat cache: a file whose (size, mtime, ctime, inode) match
-- and whose projection still holds the recorded manifest is not re-read.
CREATE TABLE import_cache (
    branch   INTEGER NOT NULL,
    path     BLOB    NOT NULL,
    size     INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    ctime_ns INTEGER NOT NULL,
    host_ino INTEGER NOT NULL,
    manifest BLOB    NOT NULL,
    PRIMARY KEY (branch, path)
) WITHOUT ROWID;

-- Remotes known to this store (art remote add).
CREATE TABLE remotes (
    name TEXT PRIMARY KEY,
    url  TEXT NOT NULL
);
