-- art store, schema version 7. See docs/store-format.md, "Journal".

-- Two indexes that no query of art's reads, dropped: each was only a cost
-- paid by every write.
--
-- events_by_path: the one query on events.path (art log --path) also
-- matches renames and links by kind, an OR term no index serves, so SQLite
-- scans events (or events_by_branch with --branch) and never chose this
-- index. Its entries sort by path, so every event landed in a leaf of its
-- own; an rm -rf of 11,530 entries wrote a fifth of its WAL pages here.
--
-- nodes_dirty: no query selects nodes by state; every directory turning
-- dirty, clean or removed only rewrote it.
DROP INDEX events_by_path;
DROP INDEX nodes_dirty;
