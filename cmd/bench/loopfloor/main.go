// Command loopfloor serves a directory through go-fuse's loopback node
// (fs.NewLoopbackRoot, the node go-fuse's example/loopback serves) with
// the kernel-facing options art's own mount uses: the bench's workloads
// section mounts it as the FUSE floor (place L) under art's numbers.
//
//	loopfloor [-timeout 1h] [-counts FILE] [-uring N] MOUNTPOINT DIR
//
// go-fuse's example as shipped asks the kernel to keep names and
// attributes for 1 s (libfuse's default); art keeps them an hour (it is
// the only writer of its tree), so with the example a second `git
// status` a few seconds after the first looked every file up again where
// art's mount answered from the kernel's caches: not a floor under art.
// Everything else the kernel sees is set as in art's overlay.fuseOptions:
// allow_other with default_permissions (as root), a direct mount, 1 MiB
// writes, 64 background requests, HANDLE_KILLPRIV_V2 and ATOMIC_O_TRUNC.
// As root, go-fuse hands every open file to the kernel (FUSE
// passthrough), as art does for the files it passes through.
//
// -uring N serves the requests over io_uring (internal/fuseuring, as
// art's mount does as root) with N threads a CPU, one request each: the
// floor under art's own transport. It needs root and a kernel with FUSE
// over io_uring, and switches the fuse module's enable_uring on as art
// does.
//
// It mounts, then serves until SIGTERM or SIGINT, when it unmounts and
// exits 0; a failed unmount exits 1. Run as root (a direct mount).
//
// -counts FILE appends the requests served, by opcode, to FILE at
// unmount, in the format of art's ART_FUSE_COUNTS ("LOOKUP 17150" a
// line, then "--"), so the floor's requests compare with art's. Like
// art's, it counts go-fuse's debug lines: counts, not timings; and like
// art's, SIGUSR1 appends the counts so far and starts a new tally (one
// mount's runs counted apart).
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/artrt/art/internal/fuseuring"
)

func main() {
	timeout := flag.Duration("timeout", time.Hour, "how long the kernel may keep names, attributes and negative lookups")
	counts := flag.String("counts", "", "append the requests served, by opcode, to `FILE` at unmount")
	uring := flag.Int("uring", 0, "serve requests over io_uring with `N` threads a CPU, as art's mount does as root (0: read and write /dev/fuse)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: loopfloor [-timeout D] [-counts FILE] [-uring N] MOUNTPOINT DIR")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	if err := serve(flag.Arg(0), flag.Arg(1), *timeout, *counts, *uring); err != nil {
		fmt.Fprintln(os.Stderr, "loopfloor:", err)
		os.Exit(1)
	}
}

func serve(mnt, dir string, timeout time.Duration, counts string, uring int) error {
	root, err := fs.NewLoopbackRoot(dir)
	if err != nil {
		return fmt.Errorf("loopback root %s: %w", dir, err)
	}
	root0 := os.Geteuid() == 0
	opts := &fs.Options{
		EntryTimeout:    &timeout,
		AttrTimeout:     &timeout,
		NegativeTimeout: &timeout,
		NullPermissions: true,
		MountOptions: fuse.MountOptions{
			FsName:            dir,
			Name:              "loopfloor",
			AllowOther:        root0,
			MaxWrite:          1 << 20,
			MaxBackground:     64,
			DirectMount:       true,
			DirectMountStrict: root0,
			Options:           []string{"default_permissions"},
			ExtraCapabilities: fuse.CAP_HANDLE_KILLPRIV_V2 | fuse.CAP_ATOMIC_O_TRUNC,
		},
	}
	var c *opCounts
	if counts != "" {
		c = &opCounts{n: map[string]int64{}}
		opts.Debug = true
		opts.MountOptions.Logger = log.New(c, "", 0)
	}
	raw := fs.NewNodeFS(root, opts)
	var server *fuse.Server
	var rings *fuseuring.Rings
	if uring > 0 {
		fuseuring.SwitchOn()
		server, rings, err = fuseuring.MountServe(raw, mnt, opts.MountOptions, fuseuring.Options{Threads: uring, Entries: 1, MaxPayload: opts.MaxWrite})
		if err == nil && rings == nil {
			err = errors.New("the kernel did not offer io_uring")
		}
		if err != nil {
			// Served through /dev/fuse, that is no floor under art's rings.
			if server != nil {
				syscall.Unmount(mnt, syscall.MNT_DETACH)
			}
			return fmt.Errorf("mount %s over io_uring: %w", mnt, err)
		}
	} else {
		if server, err = fuse.NewServer(raw, mnt, &opts.MountOptions); err != nil {
			return fmt.Errorf("mount %s: %w", mnt, err)
		}
		go server.Serve()
		if err := server.WaitMount(); err != nil {
			return fmt.Errorf("mount %s: %w", mnt, err)
		}
	}
	if c != nil {
		usr1 := make(chan os.Signal, 1)
		signal.Notify(usr1, syscall.SIGUSR1)
		go func() {
			for range usr1 {
				if err := c.appendTo(counts); err != nil {
					fmt.Fprintln(os.Stderr, "loopfloor:", err)
				}
			}
		}()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	unmounted := make(chan error, 1)
	go func() {
		<-sig
		if uring > 0 {
			// go-fuse does not unmount a descriptor it was given.
			unmounted <- syscall.Unmount(mnt, 0)
			return
		}
		unmounted <- server.Unmount()
	}()
	server.Wait()
	if rings != nil {
		if err := rings.Wait(); err != nil {
			fmt.Fprintln(os.Stderr, "loopfloor:", err)
		}
		fmt.Fprintf(os.Stderr, "loopfloor: %d requests over io_uring\n", rings.Served.Load())
	}
	if c != nil {
		if err := c.appendTo(counts); err != nil {
			return err
		}
	}
	select {
	case err := <-unmounted:
		if err != nil {
			return fmt.Errorf("unmount %s: %w", mnt, err)
		}
	default: // unmounted from outside (umount MNT)
	}
	return nil
}

// opCounts counts the requests in go-fuse's debug log, whose lines for a
// request read "rx ID: OPCODE ...".
type opCounts struct {
	mu sync.Mutex
	n  map[string]int64
}

func (c *opCounts) Write(p []byte) (int, error) {
	for _, l := range strings.Split(string(p), "\n") {
		rest, ok := strings.CutPrefix(l, "rx ")
		if !ok {
			continue
		}
		if _, rest, ok = strings.Cut(rest, ": "); ok {
			op, _, _ := strings.Cut(rest, " ")
			c.mu.Lock()
			c.n[op]++
			c.mu.Unlock()
		}
	}
	return len(p), nil
}

// appendTo appends the counts since the last append to path.
func (c *opCounts) appendTo(path string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, op := range slices.Sorted(maps.Keys(c.n)) {
		fmt.Fprintf(&b, "%s %d\n", op, c.n[op])
	}
	clear(c.n)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(b.String() + "--\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
