package journal

import (
	"time"

	"github.com/artrt/art/cas"
)

// gcCutoff is the highest rowid a sweep may remove: with no grace period
// every row present when gc began (maxRowid); with one, the rows present
// at the generation mark (markRowid, 0 when there is none) taken at least
// the grace period ago.
func gcCutoff(maxRowid int64, grace time.Duration, markRowid int64) int64 {
	if grace > 0 {
		return min(markRowid, maxRowid)
	}
	return maxRowid
}

// gcObject is one row of the objects table as the sweep sees it.
type gcObject struct {
	rowid int64
	id    cas.ID
	size  int64         // stored bytes, in the row or its pack
	pack  cas.PackRange // Pack 0: stored in the row
}

// sweepPlan is what a local gc removes, decided from plain data (the
// marked set, the mark and the rows) with no I/O: gcPlan feeds it the rows
// one at a time (a store may hold millions), gcExecute applies it.
type sweepPlan struct {
	marked   map[cas.ID]struct{}
	maxRowid int64 // the newest row, kept so future rowids stay above every mark
	cutoff   int64 // rows above it are within the grace period

	doomed         []int64         // rowids to delete
	dead           []cas.PackRange // packed bytes of the doomed rows, to punch
	removedBytes   int64
	protected      int64 // unreachable but within the grace period
	protectedBytes int64
}

func newSweepPlan(marked map[cas.ID]struct{}, maxRowid, cutoff int64) *sweepPlan {
	return &sweepPlan{marked: marked, maxRowid: maxRowid, cutoff: cutoff}
}

// consider decides the fate of one row: kept if marked; protected if
// written after the cutoff or the newest row (SQLite gives a new row
// max(rowid)+1, so keeping it keeps every future rowid above every
// recorded mark); removed otherwise.
func (p *sweepPlan) consider(o gcObject) {
	if _, ok := p.marked[o.id]; ok {
		return
	}
	if o.rowid > p.cutoff || o.rowid == p.maxRowid {
		p.protected++
		p.protectedBytes += o.size
		return
	}
	p.doomed = append(p.doomed, o.rowid)
	if o.pack.Pack != 0 {
		p.dead = append(p.dead, o.pack)
	}
	p.removedBytes += o.size
}

// report fills rep's counts from the plan (ObjectsBefore and BytesBefore
// already set).
func (p *sweepPlan) report(rep *GCReport) {
	rep.Reachable = int64(len(p.marked))
	rep.Removed = int64(len(p.doomed))
	rep.RemovedBytes = p.removedBytes
	rep.Protected, rep.ProtectedBytes = p.protected, p.protectedBytes
	rep.ObjectsAfter = rep.ObjectsBefore - rep.Removed
	rep.BytesAfter = rep.BytesBefore - rep.RemovedBytes
}
