package main

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/execapi"
	"github.com/artrt/art/hostconfig"
	"github.com/artrt/art/internal/errclass"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/mergeop"
	"github.com/artrt/art/migrations"
	"github.com/artrt/art/netpolicy"
	"github.com/artrt/art/netproxy"
	"github.com/artrt/art/overlay"
	"github.com/artrt/art/remote"
	"github.com/artrt/art/remote/s3api"
	"github.com/artrt/art/retention"
	"github.com/artrt/art/sandbox"
	"github.com/artrt/art/seccomp"
	"github.com/artrt/art/session"
	"github.com/artrt/art/tracer"
	"github.com/artrt/art/workspace"
	"github.com/mattn/go-sqlite3"
)

// surfaceRow is one error and what every surface makes of it: its class,
// the CLI's exit status and default hint (a prefix; "" for none), and the
// exec API's code (which MCP's tool errors carry too: mcpserver maps
// with execapi.CodeOf).
type surfaceRow struct {
	name  string
	err   error
	class errclass.Class
	exit  int
	hint  string
	code  execapi.Code
}

const (
	hintDamaged  = "the store is damaged"
	hintRev      = "art log lists snapshots"
	hintReadOnly = "this user cannot write"
	hintFull     = "the file system is full"
)

// sentinelRows lists every exported sentinel (Err*) of art's packages;
// TestErrorListComplete keeps it complete.
var sentinelRows = []surfaceRow{
	{"cas.ErrNotFound", cas.ErrNotFound, errclass.Corrupt, exitCorrupt, hintDamaged, execapi.CodeStore},
	{"cas.ErrCorrupt", cas.ErrCorrupt, errclass.Corrupt, exitCorrupt, hintDamaged, execapi.CodeStore},
	{"cas.ErrMalformed", cas.ErrMalformed, errclass.Invalid, exitFailure, "", execapi.CodeStore},
	{"cas.ErrTooLarge", cas.ErrTooLarge, errclass.Invalid, exitFailure, "", execapi.CodeStore},
	{"cas.ErrInvalidID", cas.ErrInvalidID, errclass.Invalid, exitFailure, "", execapi.CodeStore},
	{"cas.ErrPackWrite", cas.ErrPackWrite, errclass.Unavailable, exitFailure, "", execapi.CodeStore},
	{"cas.ErrTooDeep", cas.ErrTooDeep, errclass.Invalid, exitFailure, "", execapi.CodeStore},
	{"cas.ErrPacksNotDir", cas.ErrPacksNotDir, errclass.Invalid, exitFailure, "", execapi.CodeStore},
	{"journal.ErrBranchExists", journal.ErrBranchExists, errclass.Conflict, exitFailure, "", execapi.CodeStore},
	{"journal.ErrBranchNotFound", journal.ErrBranchNotFound, errclass.NotFound, exitNotFound, "art branch lists the branches", execapi.CodeRevNotFound},
	{"journal.ErrRevNotFound", journal.ErrRevNotFound, errclass.NotFound, exitNotFound, hintRev, execapi.CodeRevNotFound},
	{"journal.ErrAmbiguous", journal.ErrAmbiguous, errclass.NotFound, exitNotFound, hintRev, execapi.CodeRevNotFound},
	{"journal.ErrBadRev", journal.ErrBadRev, errclass.Usage, exitUsage, "REV is NAME", execapi.CodeMalformed},
	{"journal.ErrNothingToUndo", journal.ErrNothingToUndo, errclass.Conflict, exitFailure, "", execapi.CodeStore},
	{"journal.ErrRemoteExists", journal.ErrRemoteExists, errclass.Conflict, exitFailure, "", execapi.CodeStore},
	{"journal.ErrRemoteNotFound", journal.ErrRemoteNotFound, errclass.NotFound, exitNotFound, "art remote list", execapi.CodeRevNotFound},
	{"journal.ErrHeadMoved", journal.ErrHeadMoved, errclass.Conflict, exitFailure, "", execapi.CodeStore},
	{"journal.ErrGCRaced", journal.ErrGCRaced, errclass.Conflict, exitFailure, "", execapi.CodeStore},
	{"journal.ErrCorrupt", journal.ErrCorrupt, errclass.Corrupt, exitCorrupt, hintDamaged, execapi.CodeStore},
	{"journal.ErrReadOnly", journal.ErrReadOnly, errclass.Permission, exitFailure, hintReadOnly, execapi.CodeStore},
	{"journal.ErrNotStore", journal.ErrNotStore, errclass.NotFound, exitNotFound, "-d names the store file", execapi.CodeRevNotFound},
	{"journal.ErrOldSchema", journal.ErrOldSchema, errclass.Unavailable, exitFailure, "", execapi.CodeStore},
	{"journal.ErrGCDuringBackup", journal.ErrGCDuringBackup, errclass.Conflict, exitFailure, "", execapi.CodeStore},
	{"journal.ErrBatchFailed", journal.ErrBatchFailed, errclass.Unavailable, exitFailure, "", execapi.CodeStore},
	{"journal.ErrForgotten", journal.ErrForgotten, errclass.NotFound, exitNotFound, "", execapi.CodeRevNotFound},
	{"mergeop.ErrConflicts", mergeop.ErrConflicts, errclass.Conflict, exitFailure, "", execapi.CodeStore},
	{"mergeop.ErrMoved", mergeop.ErrMoved, errclass.Conflict, exitFailure, "", execapi.CodeStore},
	{"migrations.ErrTooNew", migrations.ErrTooNew, errclass.Unavailable, exitFailure, "", execapi.CodeStore},
	{"netpolicy.ErrBadRule", netpolicy.ErrBadRule, errclass.Invalid, exitFailure, "", execapi.CodeStore},
	{"hostconfig.ErrBadConfig", hostconfig.ErrBadConfig, errclass.Invalid, exitFailure, "", execapi.CodeStore},
	{"netproxy.ErrClosed", netproxy.ErrClosed, errclass.Unavailable, exitFailure, "", execapi.CodeStore},
	{"overlay.ErrNoFUSE", overlay.ErrNoFUSE, errclass.Unavailable, exitFailure, "make /dev/fuse usable", execapi.CodeStore},
	{"remote.ErrRefChanged", remote.ErrRefChanged, errclass.Conflict, exitFailure, "", execapi.CodeStore},
	{"remote.ErrNonFastForward", remote.ErrNonFastForward, errclass.Conflict, exitFailure, "", execapi.CodeStore},
	{"remote.ErrNoBranch", remote.ErrNoBranch, errclass.NotFound, exitNotFound, "", execapi.CodeRevNotFound},
	{"remote.ErrBadURL", remote.ErrBadURL, errclass.Invalid, exitFailure, "", execapi.CodeStore},
	{"remote.ErrTooLarge", remote.ErrTooLarge, errclass.Invalid, exitFailure, "", execapi.CodeStore},
	{"remote.ErrMalformed", remote.ErrMalformed, errclass.Invalid, exitFailure, "", execapi.CodeStore},
	{"retention.ErrBadConfig", retention.ErrBadConfig, errclass.Invalid, exitFailure, "", execapi.CodeStore},
	{"sandbox.ErrInvalid", sandbox.ErrInvalid, errclass.Invalid, exitFailure, "", execapi.CodeStore},
	{"sandbox.ErrUnavailable", sandbox.ErrUnavailable, errclass.Unavailable, exitFailure, "", execapi.CodeStore},
	{"seccomp.ErrUnknownSyscall", seccomp.ErrUnknownSyscall, errclass.Invalid, exitFailure, "", execapi.CodeStore},
	{"seccomp.ErrUnsupportedArch", seccomp.ErrUnsupportedArch, errclass.Unavailable, exitFailure, "", execapi.CodeStore},
	{"netproxy.ErrCommandNotFound", netproxy.ErrCommandNotFound, errclass.CommandNotFound, 127, "", execapi.CodeNotFound},
	{"tracer.ErrUnsupported", tracer.ErrUnsupported, errclass.Unavailable, exitFailure, "", execapi.CodeStore},
	{"workspace.ErrTooLarge", workspace.ErrTooLarge, errclass.Invalid, exitFailure, "", execapi.CodeStore},
	{"workspace.ErrHostConflicts", workspace.ErrHostConflicts, errclass.Conflict, exitFailure, "", execapi.CodeStore},
}

// typeRows lists every exported error type of art's packages (a type
// with an Error method), as the error a package makes of it. A type that
// wraps a cause has its cause's class.
var typeRows = []surfaceRow{
	{"cas.CorruptError", &cas.CorruptError{Reason: "hash mismatch"}, errclass.Corrupt, exitCorrupt, hintDamaged, execapi.CodeStore},
	{"cas.WalkError", &cas.WalkError{Err: cas.ErrNotFound}, errclass.Corrupt, exitCorrupt, hintDamaged, execapi.CodeStore},
	{"execapi.Error", execapi.Errorf(execapi.CodeTimeout, "timed out"), errclass.Failure, exitFailure, "", execapi.CodeTimeout},
	{"journal.BranchInUseError", &journal.BranchInUseError{Store: "ws.db", Branch: "main"}, errclass.Conflict, exitFailure, "end that session first", execapi.CodeStore},
	{"overlay.FailedError", &overlay.FailedError{Err: syscall.ENOSPC}, errclass.Unavailable, exitFailure, hintFull, execapi.CodeStore},
	{"remote.ObjectError", &remote.ObjectError{Kind: cas.KindChunk, Err: cas.ErrNotFound}, errclass.Corrupt, exitCorrupt, hintDamaged, execapi.CodeStore},
	// An S3 answer (access denied, no such bucket...) is the store's word
	// on the request, as minio-go's error was: a plain failure.
	{"s3api.Error", &s3api.Error{Op: "GET", StatusCode: 403, Code: "AccessDenied"}, errclass.Failure, exitFailure, "", execapi.CodeStore},
	{"session.FailedError", &session.FailedError{FailedError: &overlay.FailedError{Err: syscall.EIO}}, errclass.Failure, exitFailure, "", execapi.CodeStore},
	{"session.UsageError", &session.UsageError{}, errclass.Usage, exitUsage, "see art help", execapi.CodeMalformed},
}

// foreignRows are errors art does not define that the surfaces class: the
// standard library's and SQLite's.
var foreignRows = []surfaceRow{
	{"plain", errors.New("something failed"), errclass.Failure, exitFailure, "", execapi.CodeStore},
	{"fs.ErrNotExist", &fs.PathError{Op: "open", Path: "x", Err: syscall.ENOENT}, errclass.NotFound, exitNotFound, "", execapi.CodeRevNotFound},
	{"ENOSPC", syscall.ENOSPC, errclass.Unavailable, exitFailure, hintFull, execapi.CodeStore},
	{"EACCES", &fs.PathError{Op: "open", Path: "x", Err: syscall.EACCES}, errclass.Permission, exitFailure, "", execapi.CodeStore},
	{"SQLITE_CORRUPT", sqlite3.Error{Code: sqlite3.ErrCorrupt}, errclass.Corrupt, exitCorrupt, hintDamaged, execapi.CodeStore},
	{"SQLITE_NOTADB", sqlite3.Error{Code: sqlite3.ErrNotADB}, errclass.Corrupt, exitCorrupt, hintDamaged, execapi.CodeStore},
	{"SQLITE_READONLY", sqlite3.Error{Code: sqlite3.ErrReadonly}, errclass.Permission, exitFailure, hintReadOnly, execapi.CodeStore},
	{"SQLITE_FULL", sqlite3.Error{Code: sqlite3.ErrFull}, errclass.Unavailable, exitFailure, hintFull, execapi.CodeStore},
	{"usage error", usagef("bad"), errclass.Usage, exitUsage, "see art help", execapi.CodeMalformed},
	// A chain with several classes is its strongest (errclass's order).
	{"forgotten", fmt.Errorf("%w: %w: snapshot x", journal.ErrRevNotFound, journal.ErrForgotten), errclass.NotFound, exitNotFound, hintRev, execapi.CodeRevNotFound},
	{"batch lost to corruption", fmt.Errorf("%w: %w", journal.ErrBatchFailed, sqlite3.Error{Code: sqlite3.ErrCorrupt}), errclass.Corrupt, exitCorrupt, hintDamaged, execapi.CodeStore},
}

// TestErrorSurfaces: every sentinel and error type of art maps on every
// surface, through the one class table of each: the CLI's exit status and
// hint (classify), the exec API's and MCP's code (execapi.CodeOf).
func TestErrorSurfaces(t *testing.T) {
	rows := slices.Concat(sentinelRows, typeRows, foreignRows)
	for _, r := range rows {
		err := fmt.Errorf("context: %w", r.err) // as a caller wraps it
		if got := errclass.Of(err); got != r.class {
			t.Errorf("%s: class %v, want %v", r.name, got, r.class)
		}
		code, msg, hint := classify(err)
		if code != r.exit || msg != err.Error() || !strings.HasPrefix(hint, r.hint) || (r.hint == "") != (hint == "") {
			t.Errorf("%s: exit %d hint %q, want exit %d hint %q...", r.name, code, hint, r.exit, r.hint)
		}
		if got := execapi.CodeOf(err); got != r.code {
			t.Errorf("%s: exec API code %s, want %s", r.name, got, r.code)
		}
		if execapi.CodeOf(err).Title() == "" {
			t.Errorf("%s: exec API code %s is undocumented", r.name, execapi.CodeOf(err))
		}
	}
	for _, c := range errclass.Classes() {
		if _, ok := exitCodes[c]; !ok {
			t.Errorf("class %v has no exit status", c)
		}
		if execapi.CodeOf(errclass.New(c, "x")).Title() == "" {
			t.Errorf("class %v has no exec API code", c)
		}
	}
}

// TestErrorListComplete: sentinelRows and typeRows name every exported
// Err* variable and every exported type with an Error method in art's
// packages (read with go/parser), so a new sentinel cannot miss a surface.
func TestErrorListComplete(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch {
			case rel == "cmd", rel == "bench", d.Name() == "testdata", strings.HasPrefix(d.Name(), "."):
				return filepath.SkipDir // programs (package main) and test data
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		found = append(found, exportedErrors(f)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, r := range slices.Concat(sentinelRows, typeRows) {
		listed = append(listed, r.name)
	}
	sort.Strings(found)
	sort.Strings(listed)
	found = slices.Compact(found)
	if len(found) < 40 {
		t.Fatalf("found only %d exported errors under %s: the walk is broken", len(found), root)
	}
	for _, n := range found {
		if !slices.Contains(listed, n) {
			t.Errorf("%s is not in sentinelRows or typeRows: give it a class where it is made and list it", n)
		}
	}
	for _, n := range listed {
		if !slices.Contains(found, n) {
			t.Errorf("%s is listed but no package exports it", n)
		}
	}
}

// exportedErrors names f's exported Err* variables, the exported types it
// gives an Error method and its exported types named *Error, as
// "pkg.Name".
func exportedErrors(f *ast.File) []string {
	pkg := f.Name.Name
	var out []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if d.Tok == token.VAR && strings.HasPrefix(n.Name, "Err") && n.IsExported() {
							out = append(out, pkg+"."+n.Name)
						}
					}
				case *ast.TypeSpec:
					// An error type whose Error method is promoted from an
					// embedded one (session.FailedError); an alias is its
					// owner's.
					if strings.HasSuffix(s.Name.Name, "Error") && s.Name.IsExported() && !s.Assign.IsValid() {
						out = append(out, pkg+"."+s.Name.Name)
					}
				}
			}
		case *ast.FuncDecl:
			if d.Recv == nil || d.Name.Name != "Error" || len(d.Recv.List) != 1 {
				continue
			}
			typ := d.Recv.List[0].Type
			if s, ok := typ.(*ast.StarExpr); ok {
				typ = s.X
			}
			if id, ok := typ.(*ast.Ident); ok && id.IsExported() {
				out = append(out, pkg+"."+id.Name)
			}
		}
	}
	return out
}
