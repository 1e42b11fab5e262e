-- art store, schema version 4. See docs/store-format.md, "Garbage collection".

-- Generation marks: at time_ns the objects table's highest rowid was
-- max_rowid. Objects get increasing rowids, so an object with a rowid above
-- the newest mark older than the grace period was written within it, and
-- gc never deletes it. Marks are written by gc (by_gc = 1; the newest such
-- time_ns is the store's gc generation) and, at most every ten minutes, by
-- opening the store for writing, so that a gc finds a mark about one grace
-- period old. Only gc trims this table.
CREATE TABLE gc_marks (
    time_ns   INTEGER PRIMARY KEY,
    max_rowid INTEGER NOT NULL,
    by_gc     INTEGER NOT NULL DEFAULT 0
);

-- Everything stored before this version is older than any grace period.
INSERT INTO gc_marks (time_ns, max_rowid) SELECT 0, coalesce(max(rowid), 0) FROM objects;
