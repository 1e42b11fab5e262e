package session

// A warm daemon's sandbox started ahead (docs/architecture.md, "Warm
// mounts"): after a run it served, the daemon starts the next run's
// sandbox with the policy of that run (sandbox.StartReady), so that bwrap's
// set-up - namespaces, mounts, seccomp, the cgroup - is done before the
// next client asks. The client sends its stdin, stdout and stderr with its
// begin request; when the policy of its run has the key of the sandbox
// ready, the daemon hands the command to it and supervises it (signals
// the client passes on, the timeout, the client going away) and answers
// the end with how it ended. Otherwise the client runs bwrap itself, as
// without it.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/artrt/art/internal/phase"
	"github.com/artrt/art/internal/warmwire"
	"github.com/artrt/art/sandbox"
	"golang.org/x/sys/unix"
)

// readyBox is a ready sandbox being started, or started (done closed).
type readyBox struct {
	done  chan struct{}
	r     *sandbox.Ready // nil when the start failed
	key   string         // readyKey of its configuration
	label string         // what it ran last, for the log
}

// procKey is what a sandbox inherits from the process that starts bwrap
// rather than from its configuration: the bwrap found on PATH, the
// nice value, the resource limits (but RLIMIT_NOFILE's soft one, which
// Go raises in every process and restores for the children it starts,
// and so cannot be compared from inside), the cgroup a sandbox's cgroup
// is made under. A ready sandbox serves a client only when the client's
// is the daemon's.
func procKey() string { return warmwire.ProcKey() }

// readyStdio returns the files a run's command would get as its stdin,
// stdout and stderr, and whether the run may use a ready sandbox at all:
// not with a terminal (the PTY is the client's), nor with a bind the
// client prepares around its own bwrap (a mount point made in the mount,
// the policy's lock when a read-write bind holds the workspace).
func readyStdio(o Options, c Command, cfg *sandbox.Config) ([3]*os.File, bool) {
	var files [3]*os.File
	if cfg.OwnsTTY || c.Trace.Enabled() || c.Net == sandbox.NetAllow {
		return files, false
	}
	for _, b := range cfg.Binds {
		if strings.HasPrefix(filepath.Clean(b.Guest)+"/", sandbox.GuestHome+"/") {
			return files, false
		}
		if rel, err := filepath.Rel(b.Host, o.Workspace); err == nil && !b.ReadOnly && rel != ".." && !strings.HasPrefix(rel, "../") {
			return files, false
		}
	}
	for i, s := range []any{c.Stdin, c.Stdout, c.Stderr} {
		f, ok := s.(*os.File)
		if !ok || f == nil {
			return files, false
		}
		files[i] = f
	}
	return files, true
}

// readyKey is the key a run's sandbox has: its configuration's (with the
// daemon's home and hidden paths) and what it inherits (procKey).
func readyKey(cfg *sandbox.Config, proc string) string {
	return sandbox.ReadyKey(cfg) + "\x00" + proc
}

// callWithFiles sends req with files (SCM_RIGHTS) and reads the answer.
func (w *warmConn) callWithFiles(req warmRequest, files []*os.File) (warmReply, error) {
	var r warmReply
	msg, err := json.Marshal(req)
	if err != nil {
		return r, err
	}
	msg = append(msg, '\n')
	uc, ok := w.c.(*net.UnixConn)
	if !ok {
		return w.call(req)
	}
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	n, _, err := uc.WriteMsgUnix(msg, unix.UnixRights(fds...), nil)
	if err == nil && n < len(msg) {
		_, err = uc.Write(msg[n:])
	}
	if err != nil {
		return r, fmt.Errorf("warm daemon: %w", err)
	}
	if err := w.dec.Decode(&r); err != nil {
		return r, fmt.Errorf("warm daemon: no answer: %w", err)
	}
	return r, nil
}

// readFirst reads a connection's first request and the fds sent with it
// (a client's stdio), and returns the connection with that request to
// decode.
func readFirst(c net.Conn) (*warmConn, []*os.File, error) {
	w := &warmConn{c: c, enc: json.NewEncoder(c)}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		w.dec = json.NewDecoder(bufio.NewReader(c))
		return w, nil, nil
	}
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(3*4))
	n, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, nil, err
	}
	var files []*os.File
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err == nil {
			for _, m := range msgs {
				fds, err := unix.ParseUnixRights(&m)
				if err != nil {
					continue
				}
				for _, fd := range fds {
					unix.CloseOnExec(fd) // Go asks for MSG_CMSG_CLOEXEC; to be sure
					files = append(files, os.NewFile(uintptr(fd), "client-stdio"))
				}
			}
		}
	}
	w.dec = json.NewDecoder(io.MultiReader(bytes.NewReader(buf[:n]), c))
	return w, files, nil
}

// startReady starts the next run's sandbox with cfg's policy, on a
// goroutine; takeReady waits for it. A sandbox ready before is discarded.
func (d *warmDaemon) startReady(cfg *sandbox.Config, label string) {
	// Nothing of the last run's command: bwrap's arguments, which the
	// next command can read (/proc/1/cmdline inside), would show its
	// environment (-e secrets). The stub gets the next one's.
	ready := *cfg
	ready.Command, ready.Env, ready.Cwd = nil, nil, ""
	cfg = &ready
	d.mu.Lock()
	if d.closing {
		d.mu.Unlock()
		return
	}
	old := d.ready
	box := &readyBox{done: make(chan struct{}), key: readyKey(cfg, procKey()), label: label}
	d.ready = box
	d.readying.Add(1)
	d.mu.Unlock()
	go func() {
		defer d.readying.Done()
		d.discard(old)
		r, err := sandbox.StartReady(cfg)
		if err != nil {
			warmLogf("art warm daemon: sandbox ahead: %v\n", err)
		}
		box.r = r
		close(box.done)
	}()
}

// takeReady takes the ready sandbox if its key is key (waiting for one
// being started), or discards it; nil when there is none to use.
func (d *warmDaemon) takeReady(key string) *sandbox.Ready {
	d.mu.Lock()
	box := d.ready
	d.ready = nil
	d.mu.Unlock()
	if box == nil {
		return nil
	}
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-box.done:
	case <-t.C:
		d.discardAside(box)
		return nil
	}
	if box.r == nil {
		return nil
	}
	if box.key != key {
		warmLogf("art warm daemon: sandbox ahead discarded: the run's policy is not the one of %s\n", box.label)
		d.discardAside(box)
		return nil
	}
	return box.r
}

// discardAside discards box on a goroutine (off the run's path);
// discardReady waits for it.
func (d *warmDaemon) discardAside(box *readyBox) {
	d.readying.Add(1)
	go func() {
		defer d.readying.Done()
		d.discard(box)
	}()
}

// discard kills and reaps box's sandbox once it has started.
func (d *warmDaemon) discard(box *readyBox) {
	if box == nil {
		return
	}
	<-box.done
	if box.r != nil {
		box.r.Discard()
	}
}

// discardReady discards the ready sandbox and waits for every discard
// and start in progress: at shutdown, before the unmount (a ready
// sandbox's mount namespace holds a copy of the mount).
func (d *warmDaemon) discardReady() {
	d.mu.Lock()
	box := d.ready
	d.ready = nil
	d.mu.Unlock()
	d.discard(box)
	d.readying.Wait()
	// A start that ended after the take above.
	d.mu.Lock()
	box = d.ready
	d.ready = nil
	d.mu.Unlock()
	d.discard(box)
}

// runReady hands req's command to a ready sandbox of its policy, if the
// daemon has one; nil when it has not (or the command is not found:
// the client reports that as without one).
func (d *warmDaemon) runReady(req warmRequest, files []*os.File) *sandbox.Process {
	if req.Sandbox == nil || len(files) != 3 || req.Umask < 0 {
		return nil
	}
	cfg := d.runConfig(req)
	if cfg.Validate() != nil || lookCommand(cfg) != nil {
		return nil
	}
	r := d.takeReady(readyKey(cfg, req.Proc))
	if r == nil {
		return nil
	}
	h := sandbox.Handoff{Argv: cfg.Command, Env: cfg.Environ(), Cwd: cfg.WorkDir(), Umask: req.Umask, SigIgn: req.SigIgn}
	p, err := r.Run(h, [3]*os.File{files[0], files[1], files[2]})
	if err != nil {
		warmLogf("art warm daemon: %v\n", err)
		return nil
	}
	return p
}

// readyFor says whether runReady would hand req's command to the sandbox
// started ahead, without taking it (waiting for one being started).
func (d *warmDaemon) readyFor(req warmRequest, files []*os.File) bool {
	if req.Sandbox == nil || len(files) != 3 || req.Umask < 0 {
		return false
	}
	cfg := d.runConfig(req)
	if cfg.Validate() != nil || lookCommand(cfg) != nil {
		return false
	}
	d.mu.Lock()
	box := d.ready
	d.mu.Unlock()
	if box == nil {
		return false
	}
	select {
	case <-box.done:
	case <-time.After(10 * time.Second):
		return false
	}
	return box.r != nil && box.key == readyKey(cfg, req.Proc)
}

// runConfig is the sandbox configuration of req's run in this daemon.
func (d *warmDaemon) runConfig(req warmRequest) *sandbox.Config {
	cfg := *req.Sandbox
	cfg.Home, cfg.Hide = d.home, d.hide
	return &cfg
}

// superviseReady waits for a command run on a ready sandbox, passing on
// the client's signals and enforcing the timeout as supervise does; gone
// says the client went away (its connection closed) and the sandbox was
// killed.
//
// onSignal, if not nil, hears of each signal passed on.
func superviseReady(w *warmConn, p *sandbox.Process, timeout time.Duration, onSignal func(syscall.Signal)) (res sandbox.Result, gone bool, err error) {
	msgs := make(chan warmRequest)
	eof := make(chan struct{})
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		for {
			var m warmRequest
			if w.dec.Decode(&m) != nil {
				close(eof)
				return
			}
			select {
			case msgs <- m:
			case <-quit:
				return
			}
		}
	}()
	var tc <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		tc = t.C
	}
	const grace = 5 * time.Second
	for {
		select {
		case <-p.Done():
			res, err = p.Wait()
			return res, gone, err
		case <-tc:
			go p.Stop(grace, true)
			tc = nil
		case m := <-msgs:
			sig := syscall.Signal(m.Signal)
			if m.Op == "signal" && onSignal != nil {
				onSignal(sig)
			}
			switch {
			case m.Op != "signal":
			case sig == syscall.SIGINT || sig == syscall.SIGQUIT:
				p.Signal(sig)
			case sig == syscall.SIGTERM || sig == syscall.SIGHUP:
				go p.Stop(grace, false)
			}
		case <-eof:
			// The client was killed: its sandbox dies with it, as a
			// sandbox of its own would (--die-with-parent).
			gone = true
			eof = nil
			go p.Stop(0, false)
		}
	}
}

// readySignals are the signals a run on a ready sandbox passes on.
var readySignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// passOnSignals stops catching into sigs and raises again, for this
// process's own handlers, what it caught: the command they were caught
// for did not start.
func passOnSignals(sigs chan os.Signal) {
	signal.Stop(sigs)
	for {
		select {
		case s := <-sigs:
			syscall.Kill(os.Getpid(), s.(syscall.Signal))
		default:
			return
		}
	}
}

// waitReady is the client's side of a run on a ready sandbox: it passes
// this process's signals on to the daemon and waits for the end. sigs
// has caught them since the request that started the command was sent
// (nil: from now on).
func waitReady(w *warmConn, sigs chan os.Signal) (warmReply, error) {
	if sigs == nil {
		sigs = make(chan os.Signal, 4)
		signal.Notify(sigs, readySignals...)
	}
	defer signal.Stop(sigs)
	var mu sync.Mutex
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case s := <-sigs:
				mu.Lock()
				w.enc.Encode(warmRequest{Op: "signal", Signal: int(s.(syscall.Signal))})
				mu.Unlock()
			case <-stop:
				return
			}
		}
	}()
	defer phase.Start("ready sandbox: command and end (daemon)")()
	var r warmReply
	if err := w.dec.Decode(&r); err != nil {
		return r, fmt.Errorf("warm daemon: no answer: %w", err)
	}
	if r.Result == nil && r.Error == "" && r.Failed == nil {
		return r, errors.New("warm daemon: no result")
	}
	return r, nil
}
