package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/artrt/art/internal/termtext"
	"github.com/artrt/art/remote"
)

// signalCause is the cause main cancels the command's context with when
// SIGINT or SIGTERM arrives: run then exits 128+N (130 for Ctrl-C), as a
// shell reports a command a signal ended, with one line saying what the
// interrupted verb recorded.
type signalCause struct{ sig syscall.Signal }

func (s signalCause) Error() string { return "interrupted by " + sigName(s.sig) }

func sigName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return fmt.Sprintf("signal %d", int(sig))
}

// notifySignals returns a context cancelled, with a signalCause, by the
// first SIGINT or SIGTERM. Later signals are still caught (the verb is
// winding down and says so) until stop.
func notifySignals(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			sig, _ := s.(syscall.Signal)
			cancel(signalCause{sig: sig})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}

// interruptedBy returns the signal that cancelled ctx, if one did.
func interruptedBy(ctx context.Context) (syscall.Signal, bool) {
	var sc signalCause
	if ctx.Err() != nil && errors.As(context.Cause(ctx), &sc) {
		return sc.sig, true
	}
	return 0, false
}

// interruptedError is an interrupted verb's account of what it recorded,
// the one line run prints (the cause stays reachable for errors.Is).
type interruptedError struct {
	what string // "push interrupted: nothing recorded"
	err  error
}

func (e *interruptedError) Error() string { return e.what }
func (e *interruptedError) Unwrap() error { return e.err }

// interruptedLine is the line run prints for err when a signal ended the
// command, and its exit status.
func interruptedLine(sig syscall.Signal, err error) (int, string) {
	var ie *interruptedError
	if errors.As(err, &ie) {
		return 128 + int(sig), fmt.Sprintf("art: %s (%s)", ie.what, sigName(sig))
	}
	return 128 + int(sig), fmt.Sprintf("art: interrupted by %s: %s", sigName(sig), strings.ReplaceAll(err.Error(), "\n", " "))
}

// transferInterrupted describes what an interrupted push or pull REMOTE
// recorded: the branches it had moved before the signal (each moved in
// one transaction, so each either moved or did not).
func transferInterrupted(verb string, st remote.Stats, err error) error {
	var moved []string
	for _, b := range st.Branches {
		if b.Status != "up to date" {
			moved = append(moved, termtext.Quote(b.Branch))
		}
	}
	if len(moved) == 0 {
		what := verb + " interrupted: nothing recorded, no branch moved"
		if verb == "pull" {
			what += " (objects already received stay for the next pull; art gc reclaims them)"
		} else {
			what += " (objects already sent stay there for the next push; art gc there reclaims them)"
		}
		return &interruptedError{what: what, err: err}
	}
	return &interruptedError{what: fmt.Sprintf("%s interrupted: %d branches moved before the signal (%s), the rest did not; run it again to finish",
		verb, len(moved), strings.Join(moved, ", ")), err: err}
}
