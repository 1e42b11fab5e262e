//go:build ignore

// longfuncs lists the longest non-test functions in the module, for the
// function-length guideline in docs/architecture.md ("no non-test function over
// about 100 lines; when one must be longer, its comment says why").
//
//	go run scripts/longfuncs.go            # the ten longest, from the current directory down
//	go run scripts/longfuncs.go -n 30 journal workspace
//	go run scripts/longfuncs.go -over 100  # every function over 100 lines
//
// A function's length is the number of lines from its func keyword to its
// closing brace, both included (its doc comment is not counted). Methods are
// named Type.Method. Skipped: _test.go files, testdata directories (test corpora),
// hidden directories, and files carrying Go's "Code generated ... DO NOT EDIT."
// header (the seccomp syscall tables); -all includes the generated files.
//
// It is a report, not a linter: it never fails on a long function.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type fn struct {
	name  string
	pos   string
	lines int
}

func main() {
	n := flag.Int("n", 10, "how many functions to list (0: all)")
	over := flag.Int("over", 0, "list every function longer than this many lines (overrides -n)")
	all := flag.Bool("all", false, "include generated files")
	flag.Parse()
	roots := flag.Args()
	if len(roots) == 0 {
		roots = []string{"."}
	}
	var fns []fn
	fset := token.NewFileSet()
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				name := d.Name()
				if path != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
			if err != nil {
				return fmt.Errorf("parse %s: %w", path, err)
			}
			if !*all && ast.IsGenerated(f) {
				return nil
			}
			for _, decl := range f.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				start := fset.Position(fd.Pos())
				end := fset.Position(fd.End())
				fns = append(fns, fn{
					name:  funcName(fd),
					pos:   fmt.Sprintf("%s:%d", filepath.ToSlash(path), start.Line),
					lines: end.Line - start.Line + 1,
				})
			}
			return nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "longfuncs:", err)
			os.Exit(1)
		}
	}
	sort.SliceStable(fns, func(i, j int) bool {
		if fns[i].lines != fns[j].lines {
			return fns[i].lines > fns[j].lines
		}
		return fns[i].pos < fns[j].pos
	})
	for i, f := range fns {
		if *over > 0 {
			if f.lines <= *over {
				break
			}
		} else if *n > 0 && i >= *n {
			break
		}
		fmt.Printf("%5d  %-40s %s\n", f.lines, f.name, f.pos)
	}
}

// funcName is Recv.Name for a method (pointer and type parameters dropped), Name otherwise.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		}
		break
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
