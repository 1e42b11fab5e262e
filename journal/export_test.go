package journal

// Waiting is how many Update and Commit calls wait for the Batch.
func (b *Batch) Waiting() int { return int(b.waiting.Load()) }

// SetRootPrefetch sets how many directories and entries a snapshot lists
// ahead in one query (dirs < 2: none, a query a directory) until restore.
func SetRootPrefetch(dirs, rows int) (restore func()) {
	d, r := rootPrefetchDirs, rootPrefetchRows
	rootPrefetchDirs, rootPrefetchRows = dirs, rows
	return func() { rootPrefetchDirs, rootPrefetchRows = d, r }
}
