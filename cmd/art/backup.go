package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/urfave/cli/v2"
)

func newBackupCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "backup",
		Usage:     "copy the whole store, history included, consistently while it is in use",
		UsageText: "art backup -d FILE DEST [--json]",
		Description: `A store is two things: the SQLite file FILE and the directory FILE.packs/ beside it,
which holds the bytes of large contents (once the store has any). cp FILE alone copies a
store whose large files are missing, and cp of both while art writes can copy a file
that names pack bytes the copy of the directory lacks.

art backup writes a new store DEST (and DEST.packs/) holding one consistent state of the
whole store - every branch, snapshot, op and event - while runs, pushes and gc go on:
the file is copied with SQLite's VACUUM INTO, then each pack up to the last byte the
copy names (packs are only appended to). A gc that completes meanwhile makes it stop
and remove the copy (run it again). DEST and DEST.packs must not exist; DEST appears
last, complete.

art push -d FILE OTHER.db is not a backup: it sends the branches' current states, not
their history.`,
		Flags: []cli.Flag{dbFlag(), jsonFlag()},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("backup takes one DEST (a new store file)")
			}
			dest := c.Args().First()
			path := c.String("db")
			if _, err := os.Stat(path); err != nil {
				return withHint(fmt.Errorf("open store %s: %w", path, fs.ErrNotExist), "art backup copies an existing store")
			}
			db, err := journal.Open(c.Context, path, journal.Options{ReadOnly: true})
			if err != nil {
				return err
			}
			defer db.Close()
			rep, err := db.Backup(c.Context, dest)
			if errors.Is(err, fs.ErrExist) {
				return withHint(err, "choose a new DEST: art backup never overwrites")
			}
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return writeJSON(e.stdout, rep)
			}
			packs := ""
			if rep.Packs > 0 {
				packs = fmt.Sprintf(" and %s (%d packs, %s)", termtext.Quote(cas.PacksDir(dest)), rep.Packs, fmtBytes(rep.PackBytes))
			}
			fmt.Fprintf(e.stdout, "backup: %s (%s)%s\n", termtext.Quote(dest), fmtBytes(rep.FileBytes), packs)
			return nil
		},
	}
}

// packsHint is the hint for a store whose pack directory is missing.
func packsHint(store string) string {
	return fmt.Sprintf("a store is %s plus the directory %s beside it; copy both, or copy a live store with art backup -d %s DEST",
		termtext.Quote(store), termtext.Quote(cas.PacksDir(store)), termtext.Quote(store))
}
