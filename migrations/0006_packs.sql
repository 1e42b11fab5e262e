-- art store, schema version 6. See docs/store-format.md, "Pack files".

-- Large chunks keep their stored bytes in a pack file in the directory
-- beside the store (STORE.packs/PACK.pack, PACK as 16 hex digits) rather
-- than in data: pack names the file (0: the bytes are in data, as before),
-- pack_off and pack_len the range. data is empty for a packed object. The
-- row commits after the bytes are written, so it never names a torn tail.
ALTER TABLE objects ADD COLUMN pack     INTEGER NOT NULL DEFAULT 0;
ALTER TABLE objects ADD COLUMN pack_off INTEGER NOT NULL DEFAULT 0;
ALTER TABLE objects ADD COLUMN pack_len INTEGER NOT NULL DEFAULT 0;

-- gc reads the rows of one pack at a time (which ranges are still live):
-- without this index each pack would cost a scan of the whole table,
-- inline data included.
CREATE INDEX objects_by_pack ON objects(pack, pack_off) WHERE pack != 0;
