package main

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/journal"
	"github.com/artrt/art/remote"
	"github.com/urfave/cli/v2"
)

func newRemoteCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "remote",
		Usage: "name the remotes this store pushes to and pulls from",
		UsageText: `art remote add -d FILE NAME URL
   art remote list -d FILE [--json]
   art remote remove -d FILE NAME`,
		Description: `A remote is the path of another store file or s3://BUCKET/PREFIX on any
S3-compatible service (credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_REGION; ART_S3_ENDPOINT for services other than AWS, http://HOST:PORT for no TLS).
Names are used as REMOTE by art push and art pull.`,
		Flags: []cli.Flag{dbFlag(), jsonFlag()},
		// One command with a verb argument rather than subcommands: flags
		// may then come anywhere, as on every other verb (permuteArgs).
		Action: func(c *cli.Context) error {
			args := c.Args().Slice()
			if len(args) == 0 {
				return usagef("remote takes add, list or remove")
			}
			want := map[string]int{"add": 3, "list": 1, "remove": 2}
			n, ok := want[args[0]]
			if !ok {
				return usagef("remote %s: want add, list or remove", args[0])
			}
			if len(args) != n {
				return usagef("usage: %s", map[string]string{"add": "remote add NAME URL", "list": "remote list", "remove": "remote remove NAME"}[args[0]])
			}
			open := openStore
			if args[0] == "list" {
				open = func(c *cli.Context, _ bool) (*journal.DB, error) { return openStoreRead(c) }
			}
			db, err := open(c, false)
			if err != nil {
				return err
			}
			defer db.Close()
			switch args[0] {
			case "add":
				return db.AddRemote(c.Context, args[1], args[2])
			case "remove":
				return db.RemoveRemote(c.Context, args[1])
			}
			rs, err := db.Remotes(c.Context)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return writeJSON(e.stdout, rs)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			for _, r := range rs {
				fmt.Fprintf(tw, "%s\t%s\n", termtext.Quote(r.Name), termtext.Quote(r.URL))
			}
			return tw.Flush()
		},
	}
}

func forceFlag() cli.Flag {
	return &cli.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "remote form: move branches that are not fast-forwards"}
}

// openRemote opens REMOTE: a name recorded in db (which may be nil), the
// path of a store file, or s3://BUCKET/PREFIX. With a db, an S3 remote
// keeps its pack indexes in db's cache (recorded on Close).
func openRemote(c *cli.Context, db *journal.DB, name string, opts remote.OpenOptions) (remote.Remote, error) {
	url := name // a path or an s3:// URL
	if db != nil {
		u, err := db.RemoteURL(c.Context, name)
		switch {
		case err == nil:
			url = u
		case !errors.Is(err, journal.ErrRemoteNotFound):
			return nil, err
		}
	}
	r, err := remote.Open(c.Context, url, opts)
	if err != nil {
		return nil, withHint(err, "REMOTE is a name from art remote list, a store file, or s3://BUCKET/PREFIX")
	}
	if s3, ok := r.(*remote.S3Remote); ok && db != nil {
		s3.SetIndexCache(db)
	}
	return r, nil
}

// remoteTransfer runs `art push|pull -d FILE REMOTE [BRANCH...]`.
func remoteTransfer(c *cli.Context, e *env, push bool) error {
	if c.IsSet("mount") {
		return usagef("-m DIR and a REMOTE do not mix: -m exchanges with a host directory, REMOTE with another store")
	}
	verb := "pull"
	if push {
		verb = "push"
	}
	db, err := openStore(c, !push) // pulling into a new store clones
	if err != nil {
		return err
	}
	defer db.Close()
	name := c.Args().First()
	r, err := openRemote(c, db, name, remote.OpenOptions{Create: push, ReadOnly: !push})
	if err != nil {
		return err
	}
	defer r.Close() // records new S3 pack indexes in the store's cache
	bar := newProgress(e.stderr)
	opts := remote.Options{Name: name, Force: c.Bool("force"), Progress: func(s remote.Stats) {
		bar.update("%s: %d objects, %s", verb, s.Objects, fmtBytes(s.Bytes))
	}, MaxEntries: c.Int64("max-entries"), MaxBytes: c.Int64("max-bytes")}
	branches := c.Args().Slice()[1:]
	var st remote.Stats
	if push {
		st, err = remote.Push(c.Context, db, r, branches, opts)
	} else {
		st, err = remote.Pull(c.Context, db, r, branches, opts)
	}
	bar.done()
	switch {
	case err != nil && c.Context.Err() != nil:
		return transferInterrupted(verb, st, err)
	case errors.Is(err, remote.ErrNonFastForward):
		return withHint(err, "rerun with --force to replace the other side's branch")
	case errors.Is(err, remote.ErrRefChanged):
		return withHint(err, "rerun: objects already sent are not sent again")
	case err != nil && !push:
		return withHint(err, "the local store and its branches are unchanged")
	case err != nil:
		return err
	}
	if c.Bool("json") {
		return writeJSON(e.stdout, st)
	}
	printTransfer(e.stdout, verb, name, st)
	return nil
}

func printTransfer(w io.Writer, verb, name string, st remote.Stats) {
	name = termtext.Quote(name)
	for _, b := range st.Branches {
		b.Branch = termtext.Quote(b.Branch) // a remote's branch names are someone else's
		switch {
		case b.Status == "up to date":
			fmt.Fprintf(w, "%s %s: %s %s\n", verb, name, b.Branch, b.Status)
		case b.Old.IsZero():
			fmt.Fprintf(w, "%s %s: %s %s at %s\n", verb, name, b.Branch, b.Status, b.New.Short())
		default:
			fmt.Fprintf(w, "%s %s: %s %s..%s (%s)\n", verb, name, b.Branch, b.Old.Short(), b.New.Short(), b.Status)
		}
	}
	fmt.Fprintf(w, "%s: %d objects, %s; %d objects (%s of content) already there\n",
		verb, st.Objects, fmtBytes(st.Bytes), st.DedupObjects, fmtBytes(st.DedupBytes))
}
