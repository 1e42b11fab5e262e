-- art store, schema version 3. See docs/architecture.md, "Capture".

-- The import cache records every path an import brought in, not only
-- regular files: its kind (cas.EntryKind), its permission bits (NULL: not
-- recorded, a row from before version 3) and whether its host stat was
-- racy - taken within the timestamp granularity of the file's last
-- change, so that it proves nothing and the next capture compares the
-- host file by content instead. For a symlink, manifest is the BLAKE3 of
-- its target; for a directory it is zero.
ALTER TABLE import_cache ADD COLUMN kind INTEGER NOT NULL DEFAULT 1;
ALTER TABLE import_cache ADD COLUMN mode INTEGER;
ALTER TABLE import_cache ADD COLUMN racy INTEGER NOT NULL DEFAULT 0;
