-- art store, schema version 5. See docs/store-format.md, "Forgetting history".

-- Ranges of a branch's event chain that art forget removed. The events of
-- branch with from_seq <= seq <= to_seq are gone; count of them were in the
-- chain. first_prev is the prev hash the first of them carried (the hash of
-- the kept event before the range, or zeros) and last_hash the hash of the
-- last of them, which the next kept event's prev names: art verify checks
-- the chain across the gap through these two. The event after a range
-- always records a root (a snapshot, branch or checkout event), so every
-- kept state still materializes. op is the forget op (ops table).
CREATE TABLE forgotten (
    branch     INTEGER NOT NULL,
    from_seq   INTEGER NOT NULL,
    to_seq     INTEGER NOT NULL,
    count      INTEGER NOT NULL,
    first_prev BLOB    NOT NULL,
    last_hash  BLOB    NOT NULL,
    op         INTEGER NOT NULL,
    time_ns    INTEGER NOT NULL,
    PRIMARY KEY (branch, from_seq)
) WITHOUT ROWID;

-- Snapshots art forget dropped, so that naming one says when and by which
-- op it was forgotten instead of "not found". root lets a push still
-- recognise a remote state that came from this branch as an ancestor.
CREATE TABLE forgotten_snapshots (
    id      BLOB    PRIMARY KEY,
    branch  INTEGER NOT NULL,
    seq     INTEGER NOT NULL,
    root    BLOB    NOT NULL,
    message TEXT    NOT NULL,
    op      INTEGER NOT NULL,
    time_ns INTEGER NOT NULL
);
