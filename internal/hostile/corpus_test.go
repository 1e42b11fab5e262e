package hostile

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/artrt/art/cas"
	"github.com/artrt/art/internal/testutil"
	"github.com/artrt/art/remote/s3api"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	if os.Getenv(launchEnv) != "" {
		os.Exit(launch(os.Args[1:]))
	}
	code := m.Run()
	testutil.StopMinIO()
	if artDir != "" {
		os.RemoveAll(artDir)
	}
	os.Exit(code)
}

// Limits every art process of the corpus runs under. RLIMIT_AS counts
// address space, resident or not, and the Go runtime reserves much of it
// up front without touching it (strace: two 512 MiB PROT_NONE regions
// for the page allocator, 128 MiB more for heap arenas): under 1 GiB an
// art that held 75 MiB could not map one 64 MiB block. So the limit is 2
// GiB of address space, about 700 MiB of it usable heap (one art died at
// 586 MiB in use asking for 120 MiB), with GOMEMLIMIT keeping the
// collector's target below that; each run's peak RSS is logged.
const (
	memLimit  = 2 << 30
	goMemory  = "512MiB"
	caseLimit = 60 * time.Second
)

var (
	artOnce sync.Once
	artDir  string
	artBin  string
	artErr  error
)

// art builds cmd/art once per test binary.
func art(t *testing.T) string {
	t.Helper()
	artOnce.Do(func() {
		artDir, artErr = os.MkdirTemp("", "art-hostile-")
		if artErr != nil {
			return
		}
		artBin = filepath.Join(artDir, "art")
		out, err := exec.Command("go", "build", "-o", artBin, "github.com/artrt/art/cmd/art").CombinedOutput()
		if err != nil {
			artErr = fmt.Errorf("build art: %v\n%s", err, out)
		}
	})
	if artErr != nil {
		t.Fatal(artErr)
	}
	return artBin
}

// launchEnv makes the test binary a launcher: it runs its arguments as a
// command and writes the child's peak RSS to fd 3. The peak of a child
// forked by the test process itself would include the test process's
// own memory (Linux keeps the maximum across execve, and Go forks with
// the parent's address space shared until exec), which is large after
// building the bombs.
const launchEnv = "ART_HOSTILE_LAUNCH"

func launch(args []string) int {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err := cmd.Run()
	report := os.NewFile(3, "report")
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			fmt.Fprintf(report, "%d", ru.Maxrss<<10)
		}
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		return 125
	}
	return 0
}

// result is one art invocation.
type result struct {
	args   []string
	code   int
	stderr string
	took   time.Duration
	maxRSS int64 // bytes
}

// run runs art under the corpus limits.
func run(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), caseLimit)
	defer cancel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	full := append([]string{fmt.Sprintf("--as=%d", memLimit), "--", self, art(t)}, args...)
	cmd := exec.CommandContext(ctx, "prlimit", full...)
	rep, repw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer rep.Close()
	cmd.ExtraFiles = []*os.File{repw}
	// glibc gives each thread that calls into SQLite its own 64 MiB
	// arena reservation (up to 8 per core): address space, not memory,
	// that RLIMIT_AS would count. Two arenas are plenty for art.
	cmd.Env = append(append(os.Environ(), "GOMEMLIMIT="+goMemory, "MALLOC_ARENA_MAX=2", "GOTRACEBACK=all", launchEnv+"=1"), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	err = cmd.Start()
	repw.Close()
	if err == nil {
		err = cmd.Wait()
	}
	r := result{args: args, stderr: stderr.String(), took: time.Since(start)}
	if b, rerr := io.ReadAll(rep); rerr == nil {
		fmt.Sscan(string(b), &r.maxRSS)
	}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("art %s: still running after %v", strings.Join(args, " "), caseLimit)
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("art %s: %v", strings.Join(args, " "), err)
	}
	t.Logf("art %s: exit %d in %v, peak RSS %d MiB: %s", strings.Join(args, " "), r.code, r.took.Round(time.Millisecond), r.maxRSS>>20, strings.TrimSpace(r.stderr))
	return r
}

// checkOutput: never a Go stack trace; a failure is one line.
func checkOutput(t *testing.T, r result) {
	t.Helper()
	for _, bad := range []string{"goroutine ", "panic:", "fatal error:", "runtime.", "SIGSEGV"} {
		if strings.Contains(r.stderr, bad) {
			t.Fatalf("art %s: stderr holds %q (a crash):\n%s", strings.Join(r.args, " "), bad, r.stderr)
		}
	}
	if r.code != 0 {
		lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
		if len(lines) != 1 || !strings.HasPrefix(lines[0], "art: ") {
			t.Fatalf("art %s: exit %d, want one line on stderr, got:\n%s", strings.Join(r.args, " "), r.code, r.stderr)
		}
	}
}

// fixture lays out base/ws (the destination: a file, .art policy, a hard
// link to outside) and base/sibling (outside, with a file of every kind
// of metadata).
func fixture(t *testing.T, base string) (dest, outside string) {
	t.Helper()
	dest, outside = filepath.Join(base, "ws"), filepath.Join(base, "sibling")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{dest + "/.art/config", outside + "/sub"} {
		must(os.MkdirAll(d, 0o755))
	}
	files := map[string]string{
		dest + "/.art/config/binds.json": "[]\n",
		dest + "/.art/notes":             "mine\n",
		dest + "/keep.txt":               "keep\n",
		outside + "/file.txt":            "outside\n",
		outside + "/sub/x":               "x\n",
		outside + "/shared":              SharedContent,
	}
	for p, c := range files {
		must(os.WriteFile(p, []byte(c), 0o640))
	}
	must(os.Link(outside+"/shared", dest+"/shared"))
	must(unix.Setxattr(outside+"/file.txt", "user.k", []byte("v"), 0))
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	for p := range files {
		must(os.Chtimes(p, old, old))
	}
	return dest, outside
}

// snapshot describes every file under root (all metadata, content hash,
// xattrs), skipping paths skip says to.
func snapshot(t *testing.T, root string, skip func(rel string) bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if skip != nil && skip(rel) {
			if d.IsDir() && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		desc := fmt.Sprintf("mode=%o uid=%d gid=%d size=%d", st.Mode, st.Uid, st.Gid, st.Size) // not nlink: removing the workspace's own link is allowed
		if !d.IsDir() {
			desc += fmt.Sprintf(" mtime=%d", st.Mtim.Nano())
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += " data=" + cas.Sum(b).Short()
		case unix.S_IFLNK:
			l, _ := os.Readlink(p)
			desc += " link=" + l
		}
		buf := make([]byte, 4096)
		if n, err := unix.Llistxattr(p, buf); err == nil && n > 0 {
			names := strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00")
			sort.Strings(names)
			for _, name := range names {
				v := make([]byte, 4096)
				m, _ := unix.Lgetxattr(p, name, v)
				desc += fmt.Sprintf(" %s=%q", name, v[:max(m, 0)])
			}
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diff(a, b map[string]string) string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, fmt.Sprintf("%s: %s -> %s", k, v, b[k]))
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			out = append(out, fmt.Sprintf("%s: new %s", k, v))
		}
	}
	sort.Strings(out)
	if len(out) > 20 {
		out = append(out[:20], fmt.Sprintf("... and %d more", len(out)-20))
	}
	return strings.Join(out, "\n")
}

// s3Env starts MinIO and returns art's environment for it and a client.
func s3Env(t *testing.T) ([]string, *s3api.Client) {
	srv := testutil.MinIO(t)
	c, err := s3api.New(s3api.Config{Endpoint: srv.Endpoint, Region: srv.Region, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"ART_S3_ENDPOINT=" + srv.Endpoint, "AWS_ACCESS_KEY_ID=" + srv.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + srv.SecretKey, "AWS_REGION=" + srv.Region}
	return env, c
}

// upload puts packs and a ref to root under a new bucket and returns the
// remote's URL.
func upload(t *testing.T, c *s3api.Client, packs []*Pack, root cas.ID) string {
	t.Helper()
	ctx := context.Background()
	b := make([]byte, 6)
	rand.Read(b)
	bucket := "hostile-" + hex.EncodeToString(b)
	if err := c.MakeBucket(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	put := func(key string, data []byte) {
		if _, err := c.PutObject(ctx, bucket, key, data, s3api.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range packs {
		pack, index, name := p.Bytes()
		put("r/packs/"+name+".pack", pack)
		put("r/packs/"+name+".idx", index)
	}
	ref, _ := json.Marshal(struct {
		Version int    `json:"version"`
		Root    cas.ID `json:"root"`
	}{1, root})
	put("r/refs/main", ref)
	return "s3://" + bucket + "/r"
}

// TestCorpus pulls every hostile case into a directory every way it can
// travel, under a memory and a time limit, and checks that the outcome is
// the one wanted and that nothing outside the destination (nor its .art)
// changed, whatever art did.
func TestCorpus(t *testing.T) {
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("no prlimit")
	}
	for _, c := range Cases() {
		for _, way := range []Way{WayStore, WayFile, WayS3} {
			if c.Ways&way == 0 {
				continue
			}
			t.Run(c.Name+"/"+way.String(), func(t *testing.T) {
				if c.Slow && testing.Short() {
					t.Skip("slow case")
				}
				runCase(t, c, way)
			})
		}
	}
}

func runCase(t *testing.T, c Case, way Way) {
	ctx := context.Background()
	base := t.TempDir()
	src := filepath.Join(base, "src") // stores: art may write here
	if err := os.Mkdir(src, 0o700); err != nil {
		t.Fatal(err)
	}
	dest, outside := fixture(t, base)
	if c.Prepare != nil {
		if err := c.Prepare(dest, outside); err != nil {
			t.Fatal(err)
		}
	}
	store := filepath.Join(src, "hostile.art")
	b, err := NewBuilder(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	var packs []*Pack
	var root cas.ID
	if c.Build != nil {
		if err := c.Build(b); err != nil {
			b.Close()
			t.Fatalf("build: %v", err)
		}
	}
	if way == WayS3 {
		if c.Pack != nil {
			packs, root, err = c.Pack(b)
		} else {
			root, err = b.MainRoot()
		}
		if err != nil {
			b.Close()
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if c.After != nil {
		if err := c.After(store); err != nil {
			t.Fatal(err)
		}
	}

	outsideSkip := func(rel string) bool { return rel == "src" || rel == "ws" }
	destSkip := func(rel string) bool { return rel != "." && rel != ".art" && !strings.HasPrefix(rel, ".art/") }
	beforeOut := snapshot(t, base, outsideSkip)
	beforeArt := snapshot(t, dest, destSkip)
	beforeDest := snapshot(t, dest, nil)

	local := filepath.Join(src, "local.art")
	// The destination holds host files no store has seen (keep.txt, the
	// hard link): a plain pull -m refuses to write over them, so --force
	// (record them first, then pull) is what reaches the writes under test.
	var env []string
	var steps [][]string
	switch way {
	case WayStore:
		steps = [][]string{{"pull", "-m", dest, "-d", store, "--force"}}
	case WayFile:
		steps = [][]string{{"pull", "-d", local, store}, {"pull", "-m", dest, "-d", local, "--force"}}
	case WayS3:
		var client *s3api.Client
		env, client = s3Env(t)
		if packs == nil {
			objs, err := Objects(ctx, store)
			if err != nil {
				t.Fatal(err)
			}
			p := &Pack{}
			for _, o := range objs {
				p.Add(o, cas.ID{})
			}
			packs = []*Pack{p}
		}
		url := upload(t, client, packs, root)
		steps = [][]string{{"pull", "-d", local, url}, {"pull", "-m", dest, "-d", local, "--force"}}
	}
	var last result
	for _, s := range steps {
		last = run(t, env, s...)
		checkOutput(t, last)
		if last.code != 0 {
			break
		}
	}

	switch c.Want {
	case Refused:
		if last.code != 4 {
			t.Errorf("exit %d, want 4 (a hostile store refused)", last.code)
		}
	case Limited:
		if last.code != 1 && last.code != 4 {
			t.Errorf("exit %d, want 1 (a bound the user can raise) or 4", last.code)
		}
	}
	if d := diff(beforeOut, snapshot(t, base, outsideSkip)); d != "" {
		t.Errorf("outside the destination changed:\n%s", d)
	}
	if d := diff(beforeArt, snapshot(t, dest, destSkip)); d != "" {
		t.Errorf(".art changed:\n%s", d)
	}
	if last.code != 0 {
		if d := diff(beforeDest, snapshot(t, dest, nil)); d != "" {
			t.Errorf("a refused pull changed the destination:\n%s", d)
		}
	}
	uid := uint32(os.Getuid())
	var dst unix.Stat_t
	if err := unix.Stat(dest, &dst); err == nil {
		uid = dst.Uid
	}
	var bad []string
	filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			return nil
		}
		rel, _ := filepath.Rel(dest, p)
		if st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
			bad = append(bad, fmt.Sprintf("%s: mode %o", rel, st.Mode))
		}
		if t := st.Mode & unix.S_IFMT; t == unix.S_IFCHR || t == unix.S_IFBLK || t == unix.S_IFSOCK {
			bad = append(bad, fmt.Sprintf("%s: a device or socket", rel))
		}
		if st.Uid != uid && rel != "shared" {
			bad = append(bad, fmt.Sprintf("%s: owner %d, the destination's is %d", rel, st.Uid, uid))
		}
		return nil
	})
	if len(bad) > 0 {
		t.Errorf("unsafe files in the destination:\n%s", strings.Join(bad, "\n"))
	}
}
