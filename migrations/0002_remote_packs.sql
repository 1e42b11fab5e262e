-- art store, schema version 2. See docs/remotes.md.

-- Pack indexes of S3 remotes, cached. An index is immutable and named by
-- the BLAKE3 of its bytes, so a push or pull fetches only the indexes of
-- packs this store has not seen (a listing still finds which exist).
CREATE TABLE remote_packs (
    remote TEXT NOT NULL,  -- s3://BUCKET/PREFIX
    name   TEXT NOT NULL,  -- pack name: 64 hex digits
    idx    BLOB NOT NULL,  -- the index bytes
    PRIMARY KEY (remote, name)
) WITHOUT ROWID;
