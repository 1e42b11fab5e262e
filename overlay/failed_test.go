package overlay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/overlay"
)

// shellIn runs script with /bin/sh in dir (the shell goes into the mount,
// not this process: see sh) and returns its output, whatever its status.
func shellIn(t *testing.T, dir, script string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", `cd "$1" || exit 1; `+script, "sh", dir)
	cmd.Dir = "/"
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Run()
	return out.String()
}

// TestFailedMountRefusesChanges: once the store fails under a mount, every
// change is refused with the failure's errno (ENOSPC here), reads go on,
// Unmount reports a *FailedError counting and naming what was refused, the
// store keeps what was closed before, and the mount's op is recorded as
// failed (docs/architecture.md, "Commit failure").
func TestFailedMountRefusesChanges(t *testing.T) {
	testutil.RequireFUSE(t)
	ctx := context.Background()
	dir := t.TempDir()
	db, err := journal.Open(ctx, filepath.Join(dir, "s.db"), journal.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mnt := mustMkdir(t, filepath.Join(dir, "mnt"))
	fsys, err := overlay.Mount(ctx, mnt, overlay.Options{Branch: "main", DB: db, UpperDir: mustMkdir(t, filepath.Join(dir, "upper"))})
	if err != nil {
		t.Fatal(err)
	}
	mounted := true
	defer func() {
		if mounted {
			fsys.Unmount(ctx)
		}
	}()
	out := shellIn(t, mnt, `echo kept > a.txt && mkdir d && head -c 300000 /dev/zero > d/big && echo written`)
	if out != "written\n" {
		t.Fatalf("before the failure: %q", out)
	}
	overlay.Fail(fsys, fmt.Errorf("injected: %w", syscall.ENOSPC))
	out = shellIn(t, mnt, `
cat a.txt && echo readok
ls d && echo lsok
cmp -s d/big /dev/zero; test $? = 1 && echo bigok
echo new > b.txt && echo createok
echo more >> a.txt && echo appendok
true > d/big && echo truncok
mkdir e && echo mkdirok
rm a.txt && echo rmok
mv a.txt c.txt && echo mvok
chmod 600 a.txt && echo chmodok
ln -s a.txt l && echo symlinkok
ln a.txt h && echo linkok
rmdir d && echo rmdirok
true`)
	for _, want := range []string{"kept\nreadok\n", "big\nlsok\n", "bigok\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("reads after the failure: %q missing\n%s", want, out)
		}
	}
	for _, bad := range []string{"createok", "appendok", "truncok", "mkdirok", "rmok", "mvok", "chmodok", "symlinkok", "linkok", "rmdirok"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s: a change succeeded after the failure\n%s", bad, out)
		}
	}
	if n := strings.Count(out, "No space left on device"); n < 8 {
		t.Errorf("%d refusals say ENOSPC, want every one\n%s", n, out)
	}
	err = fsys.Unmount(ctx)
	mounted = false
	var fe *overlay.FailedError
	if !errors.As(err, &fe) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("unmount: %v, want a *FailedError wrapping ENOSPC", err)
	}
	if fe.Refused < 10 || !strings.Contains(strings.Join(fe.RefusedPaths, " "), "b.txt") {
		t.Errorf("refused %d: %q, want 10 or more, b.txt among them", fe.Refused, fe.RefusedPaths)
	}
	head, err := db.Head(ctx, journal.DefaultBranch)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	e, err := db.Objects().LookupPath(ctx, head.Root, "a.txt")
	if err == nil {
		_, err = db.Objects().ReadFile(ctx, e.Target, &got)
	}
	if err != nil || got.String() != "kept\n" {
		t.Fatalf("a.txt in the store: %q (%v), want what was closed before the failure", got.String(), err)
	}
	ops, err := db.Ops(ctx, journal.LogQuery{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 || ops[0].Kind != "mount" || ops[0].EndSeq == 0 || !strings.HasPrefix(ops[0].Failed, "no space left on device; ") {
		t.Fatalf("the mount's op: %+v, want it ended and failed with ENOSPC", ops)
	}
}
