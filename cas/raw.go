package cas

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Raw is an object in its stored form: what remotes move, so compressed
// objects cross the wire compressed and are never re-encoded. Data is the
// stored bytes (a zstd frame when Codec is 1, the object itself when 0) and
// Size the length of the uncompressed object. A Raw from outside the store
// is untrusted until CheckRaw or PutRaw has verified it.
type Raw struct {
	ID    ID
	Kind  Kind
	Codec uint8
	Size  int64
	Data  []byte
}

// GetRaw returns object id in its stored form without inflating or
// verifying it (the receiver verifies). A missing object wraps ErrNotFound.
// The caller owns Data.
func (s *Store) GetRaw(ctx context.Context, id ID) (Raw, error) {
	var kind, codec, size, length, pack, packOff, packLen int64
	var data []byte
	err := s.db.QueryRowContext(ctx, selectBounded, id[:], KindChunk.maxStored(), KindTree.maxStored()).
		Scan(&kind, &codec, &size, &length, &data, &pack, &packOff, &packLen)
	if errors.Is(err, sql.ErrNoRows) {
		return Raw{}, fmt.Errorf("get %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Raw{}, fmt.Errorf("get %s: %w", id, err)
	}
	if kind < 0 || kind > 255 || codec < 0 || codec > 255 {
		return Raw{}, corrupt(id, "kind %d codec %d out of range", kind, codec)
	}
	if max := Kind(kind).maxStored(); length > max {
		return Raw{}, corrupt(id, "stored as %d bytes, limit %d", length, max)
	}
	if pack != 0 {
		if data, err = s.readPacked(id, Kind(kind), length, pack, packOff, packLen); err != nil {
			return Raw{}, err
		}
	}
	return Raw{ID: id, Kind: Kind(kind), Codec: uint8(codec), Size: size, Data: data}, nil
}

// CheckRaw verifies an untrusted object as every read does (kind and size
// limits, bounded inflation, hash) and, for manifests and trees, that the
// bytes are a canonical encoding, which bounds every count and refuses
// unsafe names. It returns the uncompressed bytes. Any problem is a
// *CorruptError naming r.ID.
func CheckRaw(r Raw) ([]byte, error) {
	if max := r.Kind.maxStored(); int64(len(r.Data)) > max {
		return nil, corrupt(r.ID, "stored as %d bytes, limit %d", len(r.Data), max)
	}
	b, err := sharedCodecs().decode(r.ID, r.Kind, int64(r.Codec), r.Size, r.Data)
	if err != nil {
		return nil, err
	}
	switch r.Kind {
	case KindManifest:
		_, err = DecodeManifest(b)
	case KindTree:
		_, err = DecodeTree(b)
	}
	if err != nil {
		return nil, corrupt(r.ID, "%v", err)
	}
	return b, nil
}

// Checked is an untrusted object that Check accepted, with its decoded
// form: a transfer verifies, stores and walks each object with one decode.
type Checked struct {
	Raw
	Tree     *Tree     // KindTree only
	Manifest *Manifest // KindManifest only
}

// Check is CheckRaw keeping the decoded manifest or tree.
func Check(r Raw) (*Checked, error) {
	if max := r.Kind.maxStored(); int64(len(r.Data)) > max {
		return nil, corrupt(r.ID, "stored as %d bytes, limit %d", len(r.Data), max)
	}
	b, err := sharedCodecs().decode(r.ID, r.Kind, int64(r.Codec), r.Size, r.Data)
	if err != nil {
		return nil, err
	}
	c := &Checked{Raw: r}
	switch r.Kind {
	case KindManifest:
		c.Manifest, err = DecodeManifest(b)
	case KindTree:
		c.Tree, err = DecodeTree(b)
	}
	if err != nil {
		return nil, corrupt(r.ID, "%v", err)
	}
	return c, nil
}

// Refs calls fn as the package-level Refs does, from the decoded form.
func (c *Checked) Refs(fn func(id ID, k Kind, size int64) error) error {
	if m := c.Manifest; m != nil {
		for _, e := range m.Extents {
			if !e.IsHole() {
				if err := fn(e.ID, KindChunk, e.Len); err != nil {
					return err
				}
			}
		}
	}
	if t := c.Tree; t != nil {
		for i := range t.Entries {
			e := &t.Entries[i]
			switch e.Kind {
			case EntryFile:
				if err := fn(e.Target, KindManifest, e.Size); err != nil {
					return err
				}
			case EntryDir:
				if err := fn(e.Target, KindTree, 0); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// PutChecked stores an object Check accepted unless its id is present; it
// returns the bytes added to the data column.
func (s *Store) PutChecked(ctx context.Context, c *Checked) (int64, error) {
	if ok, err := s.has(ctx, c.ID); err != nil || ok {
		if err != nil {
			return 0, fmt.Errorf("look up object %s: %w", c.ID.Short(), err)
		}
		return 0, nil
	}
	return s.insertRaw(ctx, c.Raw)
}

// PutRaw verifies r with CheckRaw and stores it as given unless its id is
// already present. It returns the bytes added to the data column (0 when
// the object was there). Nothing unverified is ever inserted.
func (s *Store) PutRaw(ctx context.Context, r Raw) (int64, error) {
	if ok, err := s.has(ctx, r.ID); err != nil || ok {
		if err != nil {
			return 0, fmt.Errorf("look up object %s: %w", r.ID.Short(), err)
		}
		return 0, nil
	}
	if _, err := CheckRaw(r); err != nil {
		return 0, err
	}
	return s.insertRaw(ctx, r)
}

// insertRaw inserts a verified object as given; large chunks go to a
// pack, as PutFile's do.
func (s *Store) insertRaw(ctx context.Context, r Raw) (int64, error) {
	return s.insertRawPack(ctx, r, r.Kind == KindChunk && len(r.Data) >= minPackRaw)
}

// insertRawPack inserts a verified object as given, in a pack if pack.
func (s *Store) insertRawPack(ctx context.Context, r Raw, pack bool) (int64, error) {
	n, err := s.insertStored(ctx, r.ID, r.Kind, int64(r.Codec), r.Size, r.Data, pack)
	if err != nil {
		return 0, fmt.Errorf("put %s %s: %w", r.Kind, r.ID.Short(), err)
	}
	return n, nil
}

// Refs calls fn with every object id that the manifest or tree b (verified
// bytes of kind k) refers to: a manifest's chunks, a tree's manifests and
// subtrees. It is how remotes walk a state without knowing the encodings.
// The entry's file size is passed for manifests (0 otherwise).
func Refs(k Kind, b []byte, fn func(id ID, k Kind, size int64) error) error {
	switch k {
	case KindManifest:
		m, err := DecodeManifest(b)
		if err != nil {
			return err
		}
		for _, e := range m.Extents {
			if !e.IsHole() {
				if err := fn(e.ID, KindChunk, e.Len); err != nil {
					return err
				}
			}
		}
	case KindTree:
		t, err := DecodeTree(b)
		if err != nil {
			return err
		}
		for i := range t.Entries {
			e := &t.Entries[i]
			switch e.Kind {
			case EntryFile:
				if err := fn(e.Target, KindManifest, e.Size); err != nil {
					return err
				}
			case EntryDir:
				if err := fn(e.Target, KindTree, 0); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
