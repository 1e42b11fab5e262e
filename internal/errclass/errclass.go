// Package errclass is art's one vocabulary of errors: a few classes that
// say what a caller can do about a failure, defined once. Each package
// declares its sentinels and error types with their class where it makes
// them (New, or an ErrorClass method), and each surface - the CLI's exit
// statuses (cmd/art), the exec API's codes (execapi, which MCP's tool
// errors carry too) - is one table over the classes, so the surfaces
// cannot disagree about what an error means. The model is containerd's
// errdefs; the classes are the distinctions art's surfaces make.
//
// It imports nothing of art; any package may use it.
package errclass

import (
	"io/fs"
	"syscall"
)

// Class is what kind of failure an error is. The zero value, Failure, is
// "nothing more specific".
type Class uint8

// The classes, in precedence order: when an error's chain carries several
// (a usage error wrapping a parse error, a batch failure wrapping a
// corrupt page), the first of this list wins - the order the CLI has
// always tested them in.
const (
	// Failure: nothing more specific; the operation failed (I/O, a
	// refused operation).
	Failure Class = iota
	// CommandNotFound: the program to run does not exist (the shell's
	// 127).
	CommandNotFound
	// Usage: the caller's command line or request is wrong (bad flag,
	// argument or revision syntax): fix it and ask again.
	Usage
	// Conflict: the store's present state refuses the change (the branch
	// is in use, already exists or moved; a gc ran meanwhile; nothing to
	// undo). Retrying later, or differently, can succeed.
	Conflict
	// Corrupt: stored data failed verification, or an object a state
	// needs is missing: the store is damaged.
	Corrupt
	// Unavailable: something the operation needs is missing or exhausted
	// on this host: FUSE, bwrap, a kernel feature, disk space, a store
	// schema this binary reads, the store's disk under a writer.
	Unavailable
	// Permission: this user may not do it (a read-only store or file
	// system, EACCES, EPERM).
	Permission
	// NotFound: no such store, branch, revision, remote or path.
	NotFound
	// Invalid: data art read is not acceptable (a malformed encoding or
	// config file, a bad remote URL, a state over its bounds): not the
	// command line's fault, unlike Usage.
	Invalid

	numClasses
)

// precedence lists the classes from the strongest; Failure is last.
var precedence = [...]Class{CommandNotFound, Usage, Conflict, Corrupt, Unavailable, Permission, NotFound, Invalid, Failure}

var names = [...]string{
	Failure:         "failure",
	CommandNotFound: "command not found",
	Usage:           "usage",
	Conflict:        "conflict",
	Corrupt:         "corrupt",
	Unavailable:     "unavailable",
	Permission:      "permission",
	NotFound:        "not found",
	Invalid:         "invalid",
}

func (c Class) String() string {
	if c < numClasses {
		return names[c]
	}
	return "class?"
}

// Classes returns every class, in precedence order (for tables' tests).
func Classes() []Class { return append([]Class(nil), precedence[:]...) }

// classed is implemented by errors that know their class.
type classed interface{ ErrorClass() Class }

// sentinel is an error value with a class: errors.Is compares it by
// identity, as with errors.New.
type sentinel struct {
	msg   string
	class Class
}

func (e *sentinel) Error() string     { return e.msg }
func (e *sentinel) ErrorClass() Class { return e.class }

// New returns a sentinel error with text msg and class c. Like
// errors.New, each call is a distinct error.
func New(c Class, msg string) error { return &sentinel{msg: msg, class: c} }

// Of returns err's class: the strongest class (see the constants' order)
// of any error in its chain, Failure when none has one, and for nil.
// An error in the chain has a class when it has an ErrorClass method, is
// one of the standard library's (fs.ErrNotExist and ENOENT: NotFound;
// ENOSPC, EDQUOT: Unavailable; fs.ErrPermission, EACCES, EPERM, EROFS:
// Permission), or a classifier registered by Register knows it.
func Of(err error) Class {
	best := Failure
	walk(err, func(e error) {
		if c := classOne(e); c != Failure && rank(c) < rank(best) {
			best = c
		}
	})
	return best
}

func rank(c Class) int {
	for i, p := range precedence {
		if p == c {
			return i
		}
	}
	return len(precedence)
}

// classOne is the class of e itself, not of what it wraps.
func classOne(e error) Class {
	if c, ok := e.(classed); ok {
		return c.ErrorClass()
	}
	if errno, ok := e.(syscall.Errno); ok {
		switch errno {
		case syscall.ENOENT:
			return NotFound
		case syscall.ENOSPC, syscall.EDQUOT:
			return Unavailable
		case syscall.EACCES, syscall.EPERM, syscall.EROFS:
			return Permission
		}
		return Failure
	}
	switch e {
	case fs.ErrNotExist:
		return NotFound
	case fs.ErrPermission:
		return Permission
	}
	for _, f := range classifiers {
		if c := f(e); c != Failure {
			return c
		}
	}
	return Failure
}

// walk calls f for err and every error it wraps, depth first.
func walk(err error, f func(error)) {
	for err != nil {
		f(err)
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e, f)
			}
			return
		default:
			return
		}
	}
}

var classifiers []func(error) Class

// Register adds a classifier for errors of a type art does not define
// (SQLite's), called with one error of a chain at a time (not what it
// wraps); it returns Failure for an error it does not know. Call it only
// from an init function: Of reads the list without a lock. The package
// that owns the foreign type's use registers it, as database/sql drivers
// register themselves.
func Register(f func(error) Class) { classifiers = append(classifiers, f) }
