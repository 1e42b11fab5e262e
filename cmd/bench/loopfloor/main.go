// Command loopfloor serves a directory through go-fuse's loopback node
// (fs.NewLoopbackRoot, the node go-fuse's example/loopback serves) with
// the kernel-facing options art's own mount uses: the bench's workloads
// section mounts it as the FUSE floor (place L) under art's numbers.
//
//	loopfloor [-timeout 1h] MOUNTPOINT DIR
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
// It mounts, then serves until SIGTERM or SIGINT, when it unmounts and
// exits 0; a failed unmount exits 1. Run as root (a direct mount).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

func main() {
	timeout := flag.Duration("timeout", time.Hour, "how long the kernel may keep names, attributes and negative lookups")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: loopfloor [-timeout D] MOUNTPOINT DIR")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	if err := serve(flag.Arg(0), flag.Arg(1), *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "loopfloor:", err)
		os.Exit(1)
	}
}

func serve(mnt, dir string, timeout time.Duration) error {
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
	server, err := fs.Mount(mnt, root, opts)
	if err != nil {
		return fmt.Errorf("mount %s: %w", mnt, err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	unmounted := make(chan error, 1)
	go func() {
		<-sig
		unmounted <- server.Unmount()
	}()
	server.Wait()
	select {
	case err := <-unmounted:
		if err != nil {
			return fmt.Errorf("unmount %s: %w", mnt, err)
		}
	default: // unmounted from outside (umount MNT)
	}
	return nil
}
