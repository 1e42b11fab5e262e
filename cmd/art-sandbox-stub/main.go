// Command art-sandbox-stub is the command of a sandbox a warm art daemon
// starts ahead (docs/architecture.md, "Warm mounts"): it waits for the
// next run's command and execs it. It is art's sandbox.RunStub alone, so
// that its start costs what a small Go program's does rather than art's
// whole package initialisation (~34 ms of CPU); installed beside art's
// binary, which otherwise re-executes itself as the stub. Run by hand it
// has no socket to read and exits 1.
package main

import "github.com/artrt/art/sandbox"

func main() { sandbox.RunStub() }
