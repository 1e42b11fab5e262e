package journal

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/artrt/art/cas"
)

func TestGCCutoff(t *testing.T) {
	for _, c := range []struct {
		maxRowid, mark int64
		grace          time.Duration
		want           int64
	}{
		{maxRowid: 10, want: 10},                            // no grace: every row present when gc began
		{maxRowid: 10, mark: 4, want: 10},                   // a mark means nothing without a grace period
		{maxRowid: 10, mark: 4, grace: time.Hour, want: 4},  // the rows present at the mark
		{maxRowid: 10, grace: time.Hour, want: 0},           // no mark old enough: nothing may go
		{maxRowid: 3, mark: 7, grace: time.Hour, want: 3},   // rows removed since the mark
		{maxRowid: 0, mark: 0, grace: time.Minute, want: 0}, // empty store
	} {
		if got := gcCutoff(c.maxRowid, c.grace, c.mark); got != c.want {
			t.Errorf("gcCutoff(max %d, grace %v, mark %d) = %d, want %d", c.maxRowid, c.grace, c.mark, got, c.want)
		}
	}
}

func TestSweepPlan(t *testing.T) {
	id := func(n int) cas.ID { return cas.Sum([]byte(fmt.Sprint(n))) }
	row := func(n int, size int64, pack int64) gcObject {
		o := gcObject{rowid: int64(n), id: id(n), size: size}
		if pack != 0 {
			o.pack = cas.PackRange{Pack: pack, Off: int64(n) * 100, Len: size}
		}
		return o
	}
	for _, c := range []struct {
		name              string
		rows              []gcObject
		marked            []int
		maxRowid, cutoff  int64
		doomed            []int64
		dead              int
		removed           int64
		protected, pbytes int64
	}{
		{name: "empty store"},
		{name: "all marked", rows: []gcObject{row(1, 10, 0), row(2, 20, 0)}, marked: []int{1, 2}, maxRowid: 2, cutoff: 2},
		{name: "garbage below the cutoff goes, packed bytes punched",
			rows: []gcObject{row(1, 10, 0), row(2, 20, 7), row(3, 30, 0), row(4, 1, 0)}, marked: []int{3},
			maxRowid: 4, cutoff: 4, doomed: []int64{1, 2}, dead: 1, removed: 30, protected: 1, pbytes: 1},
		{name: "the newest row stays even when unmarked",
			rows: []gcObject{row(1, 10, 0), row(2, 20, 0)}, marked: []int{1}, maxRowid: 2, cutoff: 2, protected: 1, pbytes: 20},
		{name: "grace: rows after the mark are protected",
			rows: []gcObject{row(1, 10, 0), row(2, 20, 0), row(3, 30, 0), row(4, 40, 0)}, marked: []int{4},
			maxRowid: 4, cutoff: 1, doomed: []int64{1}, removed: 10, protected: 2, pbytes: 50},
		{name: "grace with no mark old enough protects everything",
			rows: []gcObject{row(1, 10, 0), row(2, 20, 0), row(3, 30, 0)}, maxRowid: 3, cutoff: 0, protected: 3, pbytes: 60},
		{name: "a marked object is never protected or removed",
			rows: []gcObject{row(1, 10, 0), row(5, 50, 0)}, marked: []int{1, 5}, maxRowid: 5, cutoff: 0},
	} {
		marked := map[cas.ID]struct{}{}
		for _, n := range c.marked {
			marked[id(n)] = struct{}{}
		}
		p := newSweepPlan(marked, c.maxRowid, c.cutoff)
		for _, r := range c.rows {
			p.consider(r)
		}
		rep := &GCReport{ObjectsBefore: int64(len(c.rows)), BytesBefore: 1000}
		p.report(rep)
		if !slices.Equal(p.doomed, c.doomed) || len(p.dead) != c.dead || p.removedBytes != c.removed ||
			p.protected != c.protected || p.protectedBytes != c.pbytes {
			t.Errorf("%s: doomed %v dead %d removed %d protected %d (%d bytes); want %v %d %d %d (%d)", c.name,
				p.doomed, len(p.dead), p.removedBytes, p.protected, p.protectedBytes, c.doomed, c.dead, c.removed, c.protected, c.pbytes)
		}
		if rep.Removed != int64(len(c.doomed)) || rep.ObjectsAfter != int64(len(c.rows)-len(c.doomed)) ||
			rep.BytesAfter != 1000-c.removed || rep.Reachable != int64(len(c.marked)) {
			t.Errorf("%s: report %+v", c.name, rep)
		}
	}
}
