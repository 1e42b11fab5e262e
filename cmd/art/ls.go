package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"strings"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/termtext"
	"github.com/urfave/cli/v2"
)

// splitRevPath parses REV[:PATH]. Revisions never contain ':'.
func splitRevPath(s string) (rev, path string) {
	rev, path, _ = strings.Cut(s, ":")
	return rev, strings.Trim(path, "/")
}

func modeString(e *cas.Entry) string {
	m := fs.FileMode(e.Mode & 0o777)
	switch e.Kind {
	case cas.EntryDir:
		m |= fs.ModeDir
	case cas.EntrySymlink:
		m |= fs.ModeSymlink
	case cas.EntryFifo:
		m |= fs.ModeNamedPipe
	}
	if e.Mode&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if e.Mode&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if e.Mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m.String()
}

type lsEntry struct {
	Path   string      `json:"path"`
	Type   string      `json:"type"`
	Mode   uint32      `json:"mode"`
	UID    uint32      `json:"uid"`
	GID    uint32      `json:"gid"`
	Size   int64       `json:"size"`
	MTime  int64       `json:"mtime_ns"`
	ID     string      `json:"id,omitempty"`
	Link   string      `json:"link,omitempty"`
	Xattrs []cas.Xattr `json:"xattrs,omitempty"`
}

func newLsCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "ls",
		Usage:     "list a directory of any state",
		UsageText: "art ls -d FILE [REV[:PATH]] [--recursive] [--json]",
		Flags: []cli.Flag{
			dbFlag(), branchFlag("branch the default revision refers to"),
			&cli.BoolFlag{Name: "recursive", Aliases: []string{"r"}, Usage: "list subdirectories too"},
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return usagef("ls takes one REV[:PATH]")
			}
			db, err := openStoreRead(c)
			if err != nil {
				return err
			}
			defer db.Close()
			rev, path := splitRevPath(c.Args().First())
			st, err := db.Resolve(c.Context, rev, c.String("branch"))
			if err != nil {
				return err
			}
			objs := db.Objects()
			ent, err := objs.LookupPath(c.Context, st.Root, path)
			if err != nil {
				return err
			}
			var out []lsEntry
			add := func(p []byte, en *cas.Entry) {
				le := lsEntry{Path: string(p), Type: en.Kind.String(), Mode: en.Mode, UID: en.UID, GID: en.GID, Size: en.Size,
					MTime: en.MTime, Link: string(en.Link), Xattrs: en.Xattrs}
				if !en.Target.IsZero() {
					le.ID = en.Target.String()
				}
				out = append(out, le)
				if !c.Bool("json") {
					name := termtext.QuotePath(p)
					if en.Kind == cas.EntryDir {
						name += "/"
					}
					if en.Kind == cas.EntrySymlink {
						name += " -> " + termtext.QuotePath(en.Link)
					}
					fmt.Fprintf(e.stdout, "%s %5d %5d %10d %s  %s\n", modeString(en), en.UID, en.GID, en.Size, fmtTime(en.MTime), name)
				}
			}
			var walk func(prefix []byte, id cas.ID) error
			walk = func(prefix []byte, id cas.ID) error {
				t, err := objs.GetTree(c.Context, id)
				if err != nil {
					return err
				}
				for i := range t.Entries {
					en := &t.Entries[i]
					p := en.Name
					if len(prefix) > 0 {
						p = bytes.Join([][]byte{prefix, en.Name}, []byte("/"))
					}
					add(p, en)
					if c.Bool("recursive") && en.Kind == cas.EntryDir {
						if err := walk(p, en.Target); err != nil {
							return err
						}
					}
				}
				return nil
			}
			switch {
			case ent == nil:
				err = walk(nil, st.Root)
			case ent.Kind == cas.EntryDir:
				err = walk([]byte(path), ent.Target)
			default:
				add([]byte(path), ent)
			}
			if err != nil {
				return err
			}
			if c.Bool("json") {
				if out == nil {
					out = []lsEntry{}
				}
				return writeJSON(e.stdout, out)
			}
			return nil
		},
	}
}
