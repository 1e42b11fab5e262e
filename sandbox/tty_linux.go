package sandbox

import (
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// ttyCopier gives the sandbox a PTY of its own and connects it to the
// caller's streams: raw mode on the caller's terminal (so Ctrl-C and
// Ctrl-Z travel as bytes to the sandbox's foreground job), window size
// kept in step (SIGWINCH), the terminal restored on every exit path.
type ttyCopier struct {
	io        IO
	ptmx, pts *os.File
	term      int            // caller's terminal fd, -1 if stdin is not one
	saved     *unix.Termios  // its mode before raw
	winch     chan os.Signal // SIGWINCH
	out       sync.WaitGroup // output copy
	once      sync.Once
}

func newTTYCopier(stdio IO) (*ttyCopier, error) {
	ptmx, pts, err := pty.Open()
	if err != nil {
		return nil, err
	}
	t := &ttyCopier{io: stdio, ptmx: ptmx, pts: pts, term: -1}
	if f, ok := stdio.Stdin.(*os.File); ok {
		if saved, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err == nil {
			t.term, t.saved = int(f.Fd()), saved
		}
	}
	return t, nil
}

// attach makes the PTY the command's terminal: a session of its own with
// the PTY as controlling terminal.
func (t *ttyCopier) attach(cmd *exec.Cmd) {
	cmd.Stdin, cmd.Stdout, cmd.Stderr = t.pts, t.pts, t.pts
	cmd.SysProcAttr.Setsid = true
	cmd.SysProcAttr.Setctty = true
	cmd.SysProcAttr.Ctty = 0
}

// started begins copying once the command holds the PTY.
func (t *ttyCopier) started() {
	t.pts.Close() // the sandbox holds the only slave fds: EIO at its end
	if t.term >= 0 {
		t.resize()
		raw := *t.saved
		// cfmakeraw
		raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
		raw.Oflag &^= unix.OPOST
		raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
		raw.Cflag &^= unix.CSIZE | unix.PARENB
		raw.Cflag |= unix.CS8
		raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
		unix.IoctlSetTermios(t.term, unix.TCSETS, &raw)
		t.winch = make(chan os.Signal, 1)
		signal.Notify(t.winch, syscall.SIGWINCH)
		go func() {
			for range t.winch {
				t.resize()
			}
		}()
	}
	if t.io.Stdin != nil {
		// Ends at the caller's EOF, or never (a terminal): it must not
		// hold up the end of the run.
		go io.Copy(t.ptmx, t.io.Stdin)
	}
	t.out.Add(1)
	go func() {
		defer t.out.Done()
		out := t.io.Stdout
		if out == nil {
			out = io.Discard
		}
		io.Copy(out, t.ptmx) // until EIO: every slave fd closed
	}()
}

// finish waits for the output to drain and restores the terminal.
func (t *ttyCopier) finish() {
	t.out.Wait()
	t.close()
}

// close restores the caller's terminal and releases the PTY. Idempotent.
func (t *ttyCopier) close() {
	t.once.Do(func() {
		if t.winch != nil {
			signal.Stop(t.winch)
			close(t.winch)
		}
		if t.saved != nil {
			unix.IoctlSetTermios(t.term, unix.TCSETS, t.saved)
		}
		t.pts.Close()
		t.ptmx.Close()
	})
}

// resize copies the caller's window size to the PTY.
func (t *ttyCopier) resize() {
	if ws, err := unix.IoctlGetWinsize(t.term, unix.TIOCGWINSZ); err == nil {
		unix.IoctlSetWinsize(int(t.ptmx.Fd()), unix.TIOCSWINSZ, ws)
	}
}
