package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/artrt/art/migrations"
	"github.com/urfave/cli/v2"
)

// version and commit are set at link time by the Makefile
// (-X main.version=... -X main.commit=...); a plain `go build` falls back
// to what the Go toolchain recorded in the binary (module version, VCS
// stamp), and to "devel" when neither is there.
var (
	version = ""
	commit  = ""
)

// versionInfo is `art version --json`: stable field names, only grows.
type versionInfo struct {
	Version     string `json:"version"`
	Commit      string `json:"commit,omitempty"`
	CommitTime  string `json:"commit_time,omitempty"`
	Modified    bool   `json:"modified,omitempty"`
	Go          string `json:"go"`
	Platform    string `json:"platform"`
	StoreSchema int    `json:"store_schema"`
}

func currentVersion() versionInfo {
	v := versionInfo{Version: version, Commit: commit, Go: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH, StoreSchema: migrations.Latest()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if v.Commit == "" {
					v.Commit = s.Value
				}
			case "vcs.time":
				v.CommitTime = s.Value
			case "vcs.modified":
				v.Modified = v.Modified || s.Value == "true"
			}
		}
	}
	if v.Version == "" {
		v.Version = "devel"
	}
	if len(v.Commit) > 12 {
		v.Commit = v.Commit[:12]
	}
	return v
}

func (v versionInfo) String() string {
	s := "art " + v.Version
	if v.Commit != "" {
		s += " (commit " + v.Commit
		if v.Modified {
			s += ", modified"
		}
		if v.CommitTime != "" {
			s += ", " + v.CommitTime
		}
		s += ")"
	}
	return s + fmt.Sprintf("\n%s %s\nstore schema %d (older stores are upgraded when opened for writing)\n",
		v.Go, v.Platform, v.StoreSchema)
}

func newVersionCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "version",
		Usage:     "print art's version, commit, Go version and the store schema it reads and writes",
		UsageText: "art version [--json]\n   art --version",
		Flags:     []cli.Flag{jsonFlag()},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("art version takes no arguments")
			}
			return printVersion(e, c.Bool("json"))
		},
	}
}

func printVersion(e *env, asJSON bool) error {
	v := currentVersion()
	if asJSON {
		return writeJSON(e.stdout, v)
	}
	_, err := fmt.Fprint(e.stdout, v.String())
	return err
}
