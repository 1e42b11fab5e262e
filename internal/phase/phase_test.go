package phase

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestReportListsStepsInOrder(t *testing.T) {
	was := on
	on = true
	t.Cleanup(func() { on = was; steps = nil })
	second := Start("second")
	first := Start("first") // begins later, ends first: sorted by begin
	time.Sleep(time.Millisecond)
	first()
	second()
	var b bytes.Buffer
	Report(&b)
	out := b.String()
	i, j := strings.Index(out, "second"), strings.Index(out, "first")
	if i < 0 || j < 0 || i > j {
		t.Fatalf("want second before first (begin order):\n%s", out)
	}
	if !strings.Contains(out, "total since the process started") {
		t.Fatalf("no total line:\n%s", out)
	}
}

func TestOffRecordsNothing(t *testing.T) {
	was := on
	on = false
	t.Cleanup(func() { on = was; steps = nil })
	Start("x")()
	var b bytes.Buffer
	Report(&b)
	if b.Len() != 0 || len(steps) != 0 {
		t.Fatalf("off: printed %q, kept %d steps", b.String(), len(steps))
	}
}

func TestNotesFollowTheSteps(t *testing.T) {
	was := on
	on = true
	t.Cleanup(func() { on = was; steps, notes = nil, nil })
	Start("mount")()
	Note("overlay: %d copies", 3)
	var b bytes.Buffer
	Report(&b)
	out := b.String()
	i, j := strings.Index(out, "total since"), strings.Index(out, "art: phases: note: overlay: 3 copies\n")
	if i < 0 || j < 0 || j < i {
		t.Fatalf("want the note after the total line:\n%s", out)
	}
	on = false
	Note("off")
	if len(notes) != 1 {
		t.Fatalf("off: kept a note (%d notes)", len(notes))
	}
}
