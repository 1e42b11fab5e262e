-- art store, schema version 4. See docs/store-format.md, "Garbage collection".

-- Generation marks of art gc: at time_ns the objects table's highest rowid
-- was max_rowid. Objects get increasing rowids, so an object with a rowid
-- above the newest mark older than the grace period was written within it,
-- and gc never deletes it. Only gc writes and trims this table.
CREATE TABLE gc_marks (
    time_ns   INTEGER PRIMARY KEY,
    max_rowid INTEGER NOT NULL
);
