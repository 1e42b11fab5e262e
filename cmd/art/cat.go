package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/termtext"
	"github.com/urfave/cli/v2"
)

func newCatCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "cat",
		Usage:     "print a file of any state",
		UsageText: "art cat -d FILE REV:PATH",
		Flags:     []cli.Flag{dbFlag(), branchFlag("branch an empty REV refers to")},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("cat takes one REV:PATH (e.g. main:ws/main.py)")
			}
			db, err := openStoreRead(c)
			if err != nil {
				return err
			}
			defer db.Close()
			rev, path := splitRevPath(c.Args().First())
			if path == "" {
				return usagef("cat needs a path: REV:PATH")
			}
			st, err := db.Resolve(c.Context, rev, c.String("branch"))
			if err != nil {
				return err
			}
			ent, err := db.Objects().LookupPath(c.Context, st.Root, path)
			if err != nil {
				return err
			}
			switch ent.Kind {
			case cas.EntryFile:
				// A missing or short pack (a store copied without its
				// .packs directory) fails here, before any byte is written.
				if err := db.Objects().CheckPacked(c.Context, ent.Target); err != nil {
					if _, serr := os.Lstat(db.PacksDir()); errors.Is(serr, fs.ErrNotExist) {
						return withHint(err, packsHint(db.Path()))
					}
					return err
				}
				n, err := db.Objects().ReadFile(c.Context, ent.Target, e.stdout)
				if err != nil && n > 0 {
					return fmt.Errorf("%w (%d bytes written before the error)", err, n)
				}
				return err
			case cas.EntrySymlink:
				_, err = fmt.Fprintln(e.stdout, string(ent.Link))
				return err
			}
			return fmt.Errorf("%s is a %s, not a file", termtext.Quote(path), ent.Kind)
		},
	}
}
