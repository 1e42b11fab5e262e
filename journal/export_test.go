package journal

// Waiting is how many Update and Commit calls wait for the Batch.
func (b *Batch) Waiting() int { return int(b.waiting.Load()) }

// SetRootPrefetch sets how many directories and entries a snapshot lists
// ahead in one query (dirs < 2: none, a query a directory) until restore.
// held bounds the entries listed ahead and not yet entered (0: as it is).
func SetRootPrefetch(dirs, rows, held int) (restore func()) {
	d, r, h := rootPrefetchDirs, rootPrefetchRows, rootPrefetchHeld
	rootPrefetchDirs, rootPrefetchRows = dirs, rows
	if held > 0 {
		rootPrefetchHeld = held
	}
	return func() { rootPrefetchDirs, rootPrefetchRows, rootPrefetchHeld = d, r, h }
}

// RootAheadCounts is how many listings ahead snapshots made so far, how
// many found too many rows, and how many were not made for what was held.
func RootAheadCounts() (lists, tooBig, heldFull int64) {
	return rootAheadStats.lists.Load(), rootAheadStats.tooBig.Load(), rootAheadStats.heldFull.Load()
}
