package overlay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/journal"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Options configure Mount.
type Options struct {
	DB     *journal.DB
	Branch string // default journal.DefaultBranch
	// Description is recorded with the mount's operation in the log.
	Description string
	// UpperDir holds private copies of open files; it must not be visible
	// to the sandbox. Default: a new directory under os.TempDir().
	UpperDir string
	// AllowOther lets users other than the mounting one use the mount
	// (the sandbox runs as another uid).
	AllowOther bool
	// Debug logs every FUSE request.
	Debug bool
}

// FS is a mounted branch.
type FS struct {
	db       *journal.DB
	op       *journal.Op
	server   *fuse.Server
	upperDir string
	ownUpper bool
	statDir  string

	emptyOnce sync.Once
	empty     cas.ID

	mu    sync.Mutex
	nodes map[int64]*node // live nodes by art inode, for journaling at unmount
	seq   int
}

// Mount serves opts.Branch at mountpoint until Unmount.
func Mount(ctx context.Context, mountpoint string, opts Options) (*FS, error) {
	if opts.Branch == "" {
		opts.Branch = journal.DefaultBranch
	}
	if opts.Description == "" {
		opts.Description = "mount " + mountpoint
	}
	f := &FS{db: opts.DB, nodes: map[int64]*node{}, upperDir: opts.UpperDir, statDir: filepath.Dir(opts.DB.Path())}
	if f.upperDir == "" {
		d, err := os.MkdirTemp("", "art-upper-")
		if err != nil {
			return nil, err
		}
		f.upperDir, f.ownUpper = d, true
	}
	op, err := opts.DB.BeginOp(ctx, opts.Branch, "mount", opts.Description)
	if err != nil {
		f.cleanup()
		return nil, err
	}
	f.op = op
	var jn journal.Node
	if err := f.tx(ctx, func(tx *journal.Tx) error {
		var err error
		jn, err = tx.Get(journal.RootIno)
		return err
	}); err != nil {
		f.end(ctx)
		return nil, err
	}
	root := f.newNode(jn)
	long := time.Hour // art is the only writer of its upper: the kernel's caches stay true
	negative := time.Hour
	server, err := fs.Mount(mountpoint, root, &fs.Options{
		MountOptions: fuse.MountOptions{
			FsName:        "art",
			Name:          "art",
			AllowOther:    opts.AllowOther,
			MaxWrite:      1 << 20,
			MaxBackground: 64,
			EnableLocks:   true,
			DirectMount:   true,
			Debug:         opts.Debug,
			// The kernel checks permissions against the modes we report.
			Options: []string{"default_permissions"},
		},
		EntryTimeout:    &long,
		AttrTimeout:     &long,
		NegativeTimeout: &negative,
		RootStableAttr:  &fs.StableAttr{Ino: uint64(journal.RootIno)},
		NullPermissions: true,
	})
	if err != nil {
		f.end(ctx)
		return nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	f.server = server
	return f, nil
}

// Wait blocks until the filesystem is unmounted.
func (f *FS) Wait() { f.server.Wait() }

// Unmount detaches the filesystem, journals any file still dirty and ends
// the mount's operation. Safe to call twice.
func (f *FS) Unmount(ctx context.Context) error {
	var err error
	if f.server != nil {
		for i := 0; i < 50; i++ {
			if err = f.server.Unmount(); err == nil || !errors.Is(err, syscall.EBUSY) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		f.server = nil
	}
	if jerr := f.journalAll(ctx); err == nil {
		err = jerr
	}
	if eerr := f.end(ctx); err == nil {
		err = eerr
	}
	return err
}

func (f *FS) end(ctx context.Context) error {
	var err error
	if f.op != nil {
		err = f.op.End(ctx, nil)
		f.op = nil
	}
	f.cleanup()
	return err
}

func (f *FS) cleanup() {
	if f.ownUpper {
		os.RemoveAll(f.upperDir)
	}
}

// journalAll journals every dirty file (at unmount).
func (f *FS) journalAll(ctx context.Context) error {
	f.mu.Lock()
	nodes := make([]*node, 0, len(f.nodes))
	for _, n := range f.nodes {
		nodes = append(nodes, n)
	}
	f.mu.Unlock()
	var errs []error
	for _, n := range nodes {
		if err := n.journal(ctx, false); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// tx runs fn in one journal transaction of the mount's operation.
func (f *FS) tx(ctx context.Context, fn func(*journal.Tx) error) error {
	return f.op.Update(context.WithoutCancel(ctx), fn)
}

// sync makes every committed transaction durable.
func (f *FS) sync() error { return f.db.Sync() }

// emptyManifest is the id of the empty file's manifest, stored once.
func (f *FS) emptyManifest(tx *journal.Tx, ctx context.Context) (cas.ID, error) {
	var err error
	f.emptyOnce.Do(func() {
		f.empty, _, err = tx.Objects().PutManifest(ctx, &cas.Manifest{})
	})
	if err != nil {
		f.emptyOnce = sync.Once{}
	}
	return f.empty, err
}

// newUpper creates a fresh private file for content.
func (f *FS) newUpper() (*os.File, error) {
	return os.CreateTemp(f.upperDir, "u-")
}

// statfs reports the space of the filesystem that holds the store.
func (f *FS) statfs(out *fuse.StatfsOut) syscall.Errno {
	var st unix.Statfs_t
	if err := unix.Statfs(f.statDir, &st); err != nil {
		return toErrno(err)
	}
	out.Blocks, out.Bfree, out.Bavail = st.Blocks, st.Bfree, st.Bavail
	out.Files, out.Ffree = st.Files, st.Ffree
	out.Bsize, out.Frsize = uint32(st.Bsize), uint32(st.Frsize)
	out.NameLen = 255
	return 0
}
