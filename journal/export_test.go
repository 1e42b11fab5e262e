package journal

// Waiting is how many Update and Commit calls wait for the Batch.
func (b *Batch) Waiting() int { return int(b.waiting.Load()) }
