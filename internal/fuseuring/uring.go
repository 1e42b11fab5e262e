// Package fuseuring serves a FUSE connection's requests over io_uring
// (the kernel's FUSE-over-io_uring transport, Linux 6.14 and later)
// instead of read(2) and write(2) on /dev/fuse.
//
// The kernel keeps one queue per possible CPU and puts a request on the
// queue of the CPU its caller runs on. Each queue here is served by one
// OS thread pinned to that CPU with an io_uring of its own: a reply and
// the wait for the next request are one io_uring_enter(2)
// (COMMIT_AND_FETCH), where the classic transport makes a write(2) and
// a read(2), and the server's thread wakes on the caller's CPU.
//
// The requests are decoded and answered by go-fuse's ProtocolServer over
// the same RawFileSystem the classic Server serves, so both transports
// run the same code for an operation. The kernel still sends FORGETs and
// INTERRUPTs, and takes notifications, through /dev/fuse: the classic
// Server keeps serving it.
package fuseuring

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/artrt/art/internal/procs"
)

// The kernel's ABI (include/uapi/linux/fuse.h, io_uring.h).
const (
	ioringSetupSQE128  = 1 << 10
	ioringEnterGetevts = 1 << 0
	ioringFeatSingle   = 1 << 0
	ioringOffSQRing    = 0
	ioringOffCQRing    = 0x8000000
	ioringOffSQEs      = 0x10000000
	ioringOpURingCmd   = 46

	cmdRegister       = 1
	cmdCommitAndFetch = 2

	sqeSize = 128 // IORING_SETUP_SQE128: the command area holds fuse_uring_cmd_req
	cqeSize = 16

	// fuse_uring_req_header: in_out[128], op_in[128], fuse_uring_ent_in_out.
	hdrInOut      = 0
	hdrOpIn       = 128
	hdrOpInSize   = 128
	hdrCommitID   = 256 + 8
	hdrPayloadSz  = 256 + 16
	hdrSize       = 256 + 32
	inHeaderSize  = 40 // fuse_in_header
	outHeaderSize = 16 // fuse_out_header
)

// EnabledPath is the fuse module's switch for the transport; the kernel
// refuses a ring unless it reads Y.
const EnabledPath = "/sys/module/fuse/parameters/enable_uring"

// Enabled reports whether the kernel offers the transport now.
func Enabled() bool {
	b, err := os.ReadFile(EnabledPath)
	return err == nil && strings.TrimSpace(string(b)) == "Y"
}

// SwitchOn turns the fuse module's enable_uring on when it is present
// and off (root only), and reports whether the kernel offers the
// transport then. The switch lets any FUSE server on the host that asks
// for the transport use it; others are served as before.
func SwitchOn() bool {
	if !Enabled() {
		_ = os.WriteFile(EnabledPath, []byte("Y"), 0)
	}
	return Enabled()
}

// MountServe mounts raw at mountpoint (a direct mount: root) on a
// /dev/fuse descriptor of its own and serves it: go-fuse's Server takes
// what the kernel sends through /dev/fuse (everything, with rings nil,
// when the kernel does not offer io_uring), rings set up before the
// mount (Prepare) the rest, and the POLL probe is made (PollHack). mo
// is go-fuse's options for the mount.
//
// With an error: server nil, nothing is mounted; Stuck(err), server and
// rings are returned with the connection holding its requests, which
// the caller must end; otherwise the mount is served (through /dev/fuse
// when rings.Refused) and the error only says what went wrong.
func MountServe(raw fuse.RawFileSystem, mountpoint string, mo fuse.MountOptions, opts Options) (*fuse.Server, *Rings, error) {
	rings, err := Prepare(opts)
	if err != nil {
		return nil, nil, err
	}
	mo.ExtraCapabilities |= fuse.CAP_OVER_IO_URING
	fd, err := Mount(mountpoint, &mo)
	if err != nil {
		rings.Discard()
		return nil, nil, err
	}
	// go-fuse serves a descriptor given as /dev/fd/N without mounting.
	mo.DirectMount, mo.DirectMountStrict = false, false
	server, err := fuse.NewServer(raw, fmt.Sprintf("/dev/fd/%d", fd), &mo)
	if err != nil {
		rings.Discard()
		unix.Unmount(mountpoint, unix.MNT_DETACH)
		return nil, nil, err
	}
	go server.Serve()
	if server.KernelSettings().Flags64()&fuse.CAP_OVER_IO_URING == 0 {
		rings.Discard() // not offered: served the classic way
		return server, nil, PollHack(mountpoint)
	}
	err = rings.Serve(fuse.NewProtocolServer(raw, &mo), server.KernelSettings(), fd)
	if Stuck(err) {
		return server, rings, err
	}
	return server, rings, errors.Join(err, PollHack(mountpoint))
}

type ioSQRingOffsets struct {
	Head, Tail, RingMask, RingEntries, Flags, Dropped, Array, Resv1 uint32
	UserAddr                                                        uint64
}

type ioCQRingOffsets struct {
	Head, Tail, RingMask, RingEntries, Overflow, CQEs, Flags, Resv1 uint32
	UserAddr                                                        uint64
}

type ioURingParams struct {
	SQEntries, CQEntries, Flags, SQThreadCPU, SQThreadIdle, Features, WQFd uint32
	Resv                                                                   [3]uint32
	SQOff                                                                  ioSQRingOffsets
	CQOff                                                                  ioCQRingOffsets
}

// DefaultThreads is how many threads art's mount serves each CPU's
// queue with: a request is not held behind another of its CPU's
// requests that waits (a close waiting for its commit) while a thread
// is free. Measured against one thread a queue on git and npm sessions:
// no difference beyond the noise (docs/benchmarks.md).
const DefaultThreads = 2

// Options say how many threads serve a queue, how many requests each
// holds and how big a payload is.
type Options struct {
	// Threads is the number of threads serving each queue, each with an
	// io_uring of its own: a request a thread takes while another of
	// the queue's threads is busy (a close waiting for its commit) is
	// not held behind it. The kernel hands a request to the entry
	// committed last, so an idle thread stays asleep.
	Threads int
	// Entries is the number of requests each thread holds at once.
	Entries int
	// MaxPayload is the largest payload a request or reply carries: the
	// mount's max_write or max_pages times the page size, whichever is
	// larger (the kernel refuses smaller buffers).
	MaxPayload int
}

// Rings serves one connection's queues.
type Rings struct {
	ps     *fuse.ProtocolServer
	devFd  int // Serve's own duplicate of the connection's descriptor, closed when every thread has ended
	queues []*queue
	wg     sync.WaitGroup
	done   chan struct{} // closed when every thread has ended and devFd is closed
	errMu  sync.Mutex
	err    error
	// Served counts requests answered over the rings.
	Served  atomic.Int64
	refused atomic.Bool
}

// errStuck is Serve's error when a registration could not even be
// submitted: the connection then holds its requests (it negotiated
// io_uring) and the caller must end it (Stuck).
var errStuck = errors.New("fuse over io_uring: a queue's registration could not be submitted")

// Stuck reports whether Serve's err leaves the connection holding its
// requests for rings that will not come: the caller must end it. Any
// other error of Serve's leaves the connection served through /dev/fuse.
func Stuck(err error) bool { return errors.Is(err, errStuck) }

// start is what a prepared thread is told: register on devFd, or (fd
// -1) end without registering.
type start struct {
	devFd int
	res   chan<- error
}

type queue struct {
	r       *Rings
	qid     int
	devFd   int
	tid     int // the thread's id, for tests
	go_     chan start
	ringFd  int
	refuse  bool // register for a queue that does not exist (Rings.refuse)
	ringMem []byte
	sqeMem  []byte
	bufMem  []byte
	p       ioURingParams
	ents    []entry
	sqTail  uint32
	pending uint32
}

type entry struct {
	hdr     []byte
	payload []byte
	iov     [2]unix.Iovec
}

// Prepare starts the threads, pinned a CPU each, and sets up their
// rings and buffers, before the mount: after the kernel's INIT only the
// registration of the entries is left to fail, and the kernel answers a
// registration it refuses by serving the connection through /dev/fuse
// again, where a connection whose rings never came would hold every
// request.
func Prepare(opts Options) (*Rings, error) {
	if !Enabled() {
		return nil, errors.New("fuse over io_uring: the kernel's enable_uring is off")
	}
	n, err := possibleCPUs()
	if err != nil {
		return nil, err
	}
	threads := max(opts.Threads, 1)
	if n > 16 {
		threads = 1 // 2 threads a possible CPU grow too many on big hosts
	}
	r := &Rings{devFd: -1, done: make(chan struct{})}
	// Each thread waits for its requests blocked in io_uring_enter,
	// keeping its P until Go's sysmon takes it back, which after a quiet
	// spell polls only every 10 ms. With GOMAXPROCS at the CPUs' count
	// the threads could hold every P, and a goroutine one of them made
	// runnable before blocking waited for sysmon: at the mount, the
	// registrations' hand-offs took 12-19 ms instead of under 1 ms
	// (docs/benchmarks.md, "Start-up: the rings' registration"). A P
	// each for them keeps one free for the rest, until the threads end.
	release := procs.Reserve(n * threads)
	ready := make(chan error, n*threads)
	for qid := 0; qid < n; qid++ {
		for range threads {
			q := &queue{r: r, qid: qid, ringFd: -1, go_: make(chan start, 1)}
			r.queues = append(r.queues, q)
			r.wg.Add(1)
			go q.run(opts, ready)
		}
	}
	go func() {
		r.wg.Wait()
		if r.devFd >= 0 { // set by Serve before any thread may end
			unix.Close(r.devFd)
		}
		release()
		close(r.done)
	}()
	var first error
	for range r.queues {
		if err := <-ready; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		r.Discard()
		return nil, first
	}
	return r, nil
}

// Discard ends prepared rings that never registered.
func (r *Rings) Discard() {
	for _, q := range r.queues {
		q.go_ <- start{devFd: -1}
	}
	<-r.done
}

// Serve registers every thread's entries on the connection whose
// /dev/fuse descriptor is devFd (INIT answered with
// fuse.CAP_OVER_IO_URING) and serves them with ps until the connection
// ends. init is the kernel's INIT request as the classic server saw it
// (fuse.Server.KernelSettings): ps learns the negotiated protocol from
// it. The rings keep a duplicate of devFd: the caller's may close first.
//
// An error Stuck does not report means the kernel refused a registration:
// it then serves the connection through /dev/fuse by itself (what the
// threads that did register serve, they serve). Serve or Discard, once.
func (r *Rings) Serve(ps *fuse.ProtocolServer, init *fuse.InitIn, devFd int) error {
	r.ps = ps
	fd, err := unix.FcntlInt(uintptr(devFd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		err = fmt.Errorf("fuse over io_uring: %w", err)
		// Nothing registered: give the connection back to /dev/fuse with
		// a registration the kernel refuses.
		r.refuse(devFd)
		r.refused.Store(true)
		return err
	}
	r.devFd = fd
	if err := primeInit(ps, init); err != nil {
		r.refuse(devFd)
		r.refused.Store(true)
		return err
	}
	res := make(chan error, len(r.queues))
	for _, q := range r.queues {
		q.go_ <- start{devFd: fd, res: res}
	}
	var first error
	for range r.queues {
		if err := <-res; err != nil && (first == nil || errors.Is(err, errStuck)) {
			first = err
		}
	}
	if first != nil {
		r.refused.Store(true)
	}
	return first
}

// Refused reports whether Serve failed: the connection is served through
// /dev/fuse (or, when Stuck, not at all).
func (r *Rings) Refused() bool { return r.refused.Load() }

// refuse has the first thread submit a registration for a queue that
// does not exist: the kernel refuses it and serves the connection
// through /dev/fuse from then on. The threads end.
func (r *Rings) refuse(devFd int) {
	res := make(chan error, 1)
	r.queues[0].refuse = true
	r.queues[0].go_ <- start{devFd: devFd, res: res}
	<-res
	for _, q := range r.queues[1:] {
		q.go_ <- start{devFd: -1}
	}
	<-r.done
}

// Wait waits for every thread to end (the connection's teardown, or at
// once after Discard or a refused Serve) and returns the first error a
// queue met while serving.
func (r *Rings) Wait() error {
	<-r.done
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.err
}

func (r *Rings) fail(err error) {
	r.errMu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.errMu.Unlock()
}

// primeInit hands ps the kernel's INIT request, whose reply it throws
// away: the classic server answered it, and ps must size the requests it
// decodes (RENAME, SETXATTR) for the same protocol.
func primeInit(ps *fuse.ProtocolServer, init *fuse.InitIn) error {
	in := make([]byte, unsafe.Sizeof(*init))
	*(*fuse.InitIn)(unsafe.Pointer(&in[0])) = *init
	h := (*fuse.InHeader)(unsafe.Pointer(&in[0]))
	h.Length = uint32(len(in))
	h.Opcode = 26 // FUSE_INIT
	h.Unique = 1
	out := make([]byte, 4096)
	if _, st := ps.HandleRequest([][]byte{in}, [][]byte{out}); !st.Ok() {
		return fmt.Errorf("fuse over io_uring: init: %v", st)
	}
	return nil
}

// possibleCPUs is how many CPUs the kernel counts as possible
// (num_possible_cpus): its number of queues, 0 to n-1.
func possibleCPUs() (int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return 0, fmt.Errorf("fuse over io_uring: %w", err)
	}
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, ok := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, fmt.Errorf("fuse over io_uring: possible CPUs %q", b)
		}
		z := a
		if ok {
			if z, err = strconv.Atoi(hi); err != nil || z < a {
				return 0, fmt.Errorf("fuse over io_uring: possible CPUs %q", b)
			}
		}
		n += z - a + 1
	}
	if n == 0 {
		return 0, fmt.Errorf("fuse over io_uring: possible CPUs %q", b)
	}
	return n, nil
}

func (q *queue) run(opts Options, ready chan<- error) {
	defer q.r.wg.Done()
	// The ring's task work (the kernel copying a request into an entry)
	// runs on the thread that submitted the entry: one thread submits
	// and waits for all of this queue's entries.
	// Never unlocked: the thread, pinned to one CPU, ends with the
	// goroutine rather than going back to run other goroutines there.
	runtime.LockOSThread()
	q.tid = unix.Gettid()
	var set unix.CPUSet
	set.Set(q.qid)
	_ = unix.SchedSetaffinity(0, &set) // a CPU offline now: served from wherever
	if err := q.setup(opts); err != nil {
		q.close(true)
		ready <- err
		return
	}
	ready <- nil
	st := <-q.go_
	if st.devFd < 0 {
		q.close(true)
		return
	}
	q.devFd = st.devFd
	if q.refuse {
		// A registration for a queue that does not exist (qid 0xffff):
		// the kernel refuses it and gives the connection back to
		// /dev/fuse.
		q.qid = 0xffff
	}
	for i := range q.ents {
		q.push(i, cmdRegister, 0)
	}
	if err := q.enter(0); err != nil {
		// The entries never reached the kernel.
		q.close(true)
		st.res <- fmt.Errorf("%w: queue %d: %v", errStuck, q.qid, err)
		return
	}
	// A refused registration is answered at once, inline: look for it
	// without taking the completions of requests already delivered.
	if err := q.refused(); err != nil || q.refuse {
		// The kernel holds no entry of this thread's: its buffers go.
		q.close(true)
		st.res <- err
		return
	}
	st.res <- nil
	err := q.serve()
	if err != nil {
		q.r.fail(err)
	}
	// After an unexpected error the kernel may still hold an entry and
	// write into its buffers: they stay mapped (a few MiB, once).
	q.close(err == nil)
}

// Tids returns the threads' ids (for tests: signals to idle threads).
func (r *Rings) Tids() []int {
	var t []int
	for _, q := range r.queues {
		t = append(t, q.tid)
	}
	return t
}

// refused reports a registration the kernel answered with an error.
func (q *queue) refused() error {
	head := atomic.LoadUint32(q.u32(q.p.CQOff.Head))
	tail := atomic.LoadUint32(q.u32(q.p.CQOff.Tail))
	mask := *q.u32(q.p.CQOff.RingMask)
	for ; head != tail; head++ {
		off := int(q.p.CQOff.CQEs) + int(head&mask)*cqeSize
		if res := *(*int32)(unsafe.Pointer(&q.ringMem[off+8])); res < 0 {
			return fmt.Errorf("fuse over io_uring: queue %d: registration refused: %w", q.qid, unix.Errno(-res))
		}
	}
	return nil
}

func (q *queue) setup(opts Options) error {
	n := opts.Entries
	if n < 1 {
		n = 1
	}
	q.p = ioURingParams{Flags: ioringSetupSQE128}
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(2*n), uintptr(unsafe.Pointer(&q.p)), 0)
	if errno != 0 {
		return fmt.Errorf("fuse over io_uring: io_uring_setup: %w", errno)
	}
	q.ringFd = int(fd)
	if q.p.Features&ioringFeatSingle == 0 {
		return errors.New("fuse over io_uring: kernel without IORING_FEAT_SINGLE_MMAP")
	}
	sqSize := int(q.p.SQOff.Array) + int(q.p.SQEntries)*4
	cqSize := int(q.p.CQOff.CQEs) + int(q.p.CQEntries)*cqeSize
	size := max(sqSize, cqSize)
	var err error
	q.ringMem, err = unix.Mmap(q.ringFd, ioringOffSQRing, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("fuse over io_uring: map ring: %w", err)
	}
	q.sqeMem, err = unix.Mmap(q.ringFd, ioringOffSQEs, int(q.p.SQEntries)*sqeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("fuse over io_uring: map SQEs: %w", err)
	}
	q.sqTail = atomic.LoadUint32(q.u32(q.p.SQOff.Tail))
	// Buffers the kernel writes into: outside Go's heap.
	// At least what the kernel checks: max(8 KiB, max_write,
	// max_pages pages), the caller's MaxPayload.
	pg := os.Getpagesize()
	pay := (max(opts.MaxPayload, 8192) + pg - 1) / pg * pg
	per := pg + pay
	q.bufMem, err = unix.Mmap(-1, 0, n*per, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return fmt.Errorf("fuse over io_uring: map buffers: %w", err)
	}
	q.ents = make([]entry, n)
	for i := range q.ents {
		e := &q.ents[i]
		b := q.bufMem[i*per : (i+1)*per]
		e.hdr = b[:hdrSize]
		e.payload = b[pg:]
		e.iov[0] = unix.Iovec{Base: &e.hdr[0], Len: uint64(len(e.hdr))}
		e.iov[1] = unix.Iovec{Base: &e.payload[0], Len: uint64(len(e.payload))}
	}
	return nil
}

func (q *queue) u32(off uint32) *uint32 {
	return (*uint32)(unsafe.Pointer(&q.ringMem[off]))
}

// push queues a command for entry i.
func (q *queue) push(i int, op uint32, commitID uint64) {
	mask := *q.u32(q.p.SQOff.RingMask)
	idx := q.sqTail & mask
	sqe := q.sqeMem[int(idx)*sqeSize : int(idx+1)*sqeSize]
	clear(sqe)
	e := &q.ents[i]
	sqe[0] = ioringOpURingCmd
	*(*int32)(unsafe.Pointer(&sqe[4])) = int32(q.devFd)
	*(*uint32)(unsafe.Pointer(&sqe[8])) = op
	if op == cmdRegister {
		*(*uint64)(unsafe.Pointer(&sqe[16])) = uint64(uintptr(unsafe.Pointer(&e.iov[0])))
		*(*uint32)(unsafe.Pointer(&sqe[24])) = 2
	}
	*(*uint64)(unsafe.Pointer(&sqe[32])) = uint64(i)
	// fuse_uring_cmd_req in the command area at byte 48.
	*(*uint64)(unsafe.Pointer(&sqe[56])) = commitID
	*(*uint16)(unsafe.Pointer(&sqe[64])) = uint16(q.qid)
	arr := (*[1 << 20]uint32)(unsafe.Pointer(&q.ringMem[q.p.SQOff.Array]))
	arr[idx] = idx
	q.sqTail++
	atomic.StoreUint32(q.u32(q.p.SQOff.Tail), q.sqTail)
	q.pending++
}

// enter submits what push queued and waits for minComplete completions.
func (q *queue) enter(minComplete uint32) error {
	for {
		flags := uintptr(0)
		if minComplete > 0 {
			flags = ioringEnterGetevts
		}
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(q.ringFd), uintptr(q.pending), uintptr(minComplete), flags, 0, 0)
		switch errno {
		case 0:
		case unix.EINTR:
			// A signal before anything was submitted (once something is,
			// the count comes back, not an error): again.
			continue
		case unix.EAGAIN, unix.EBUSY:
			// Short of memory, or completions to reap first (not with one
			// entry a ring): again, after a pause.
			time.Sleep(time.Millisecond)
			continue
		default:
			return errno
		}
		q.pending -= uint32(n)
		if q.pending == 0 || minComplete == 0 {
			return nil
		}
	}
}

func (q *queue) serve() error {
	var in [inHeaderSize + hdrOpInSize]byte
	for {
		if err := q.enter(1); err != nil {
			return fmt.Errorf("fuse over io_uring: queue %d: %w", q.qid, err)
		}
		head := atomic.LoadUint32(q.u32(q.p.CQOff.Head))
		tail := atomic.LoadUint32(q.u32(q.p.CQOff.Tail))
		mask := *q.u32(q.p.CQOff.RingMask)
		for ; head != tail; head++ {
			off := int(q.p.CQOff.CQEs) + int(head&mask)*cqeSize
			i := int(*(*uint64)(unsafe.Pointer(&q.ringMem[off])))
			res := *(*int32)(unsafe.Pointer(&q.ringMem[off+8]))
			atomic.StoreUint32(q.u32(q.p.CQOff.Head), head+1)
			if res < 0 {
				errno := unix.Errno(-res)
				if errno == unix.ENOTCONN || errno == unix.ECANCELED || errno == unix.ENODEV {
					return nil // the connection ended
				}
				return fmt.Errorf("fuse over io_uring: queue %d: %w", q.qid, errno)
			}
			if i < 0 || i >= len(q.ents) {
				return fmt.Errorf("fuse over io_uring: queue %d: completion for entry %d", q.qid, i)
			}
			q.handle(i, in[:])
		}
	}
}

// handle answers the request in entry i and queues its commit.
func (q *queue) handle(i int, in []byte) {
	e := &q.ents[i]
	h := e.hdr
	length := *(*uint32)(unsafe.Pointer(&h[hdrInOut]))
	unique := *(*uint64)(unsafe.Pointer(&h[hdrInOut+8]))
	commitID := *(*uint64)(unsafe.Pointer(&h[hdrCommitID]))
	payloadSz := *(*uint32)(unsafe.Pointer(&h[hdrPayloadSz]))
	opSize := int64(length) - inHeaderSize - int64(payloadSz)
	var n int
	st := fuse.EIO
	if opSize >= 0 && opSize <= hdrOpInSize && int(payloadSz) <= len(e.payload) {
		copy(in, h[hdrInOut:hdrInOut+inHeaderSize])
		copy(in[inHeaderSize:], h[hdrOpIn:hdrOpIn+int(opSize)])
		reqIov := [][]byte{in[:inHeaderSize+int(opSize)]}
		if payloadSz > 0 {
			reqIov = append(reqIov, e.payload[:payloadSz])
		}
		n, st = q.r.ps.HandleRequest(reqIov, [][]byte{h[hdrInOut : hdrInOut+outHeaderSize], e.payload})
	}
	if !st.Ok() || n < outHeaderSize {
		// No reply to send: answer EIO so the caller is not left waiting.
		*(*uint32)(unsafe.Pointer(&h[hdrInOut])) = outHeaderSize
		*(*int32)(unsafe.Pointer(&h[hdrInOut+4])) = -int32(unix.EIO)
		*(*uint64)(unsafe.Pointer(&h[hdrInOut+8])) = unique
		n = outHeaderSize
	}
	*(*uint32)(unsafe.Pointer(&h[hdrPayloadSz])) = uint32(n - outHeaderSize)
	q.r.Served.Add(1)
	q.push(i, cmdCommitAndFetch, commitID)
}

// close closes the ring and unmaps what the kernel no longer holds;
// unmapBufs says the entries' buffers are not the kernel's either.
func (q *queue) close(unmapBufs bool) {
	// The ring first: its commands hold the entries' buffers.
	if q.ringFd >= 0 {
		unix.Close(q.ringFd)
		q.ringFd = -1
	}
	if q.ringMem != nil {
		unix.Munmap(q.ringMem)
		q.ringMem = nil
	}
	if q.sqeMem != nil {
		unix.Munmap(q.sqeMem)
		q.sqeMem = nil
	}
	if q.bufMem != nil && unmapBufs {
		unix.Munmap(q.bufMem)
		q.bufMem = nil
	}
}

// Mount opens /dev/fuse and mounts a FUSE file system at
// mountpoint on it, as go-fuse's direct mount does with the same
// options, and returns the descriptor: go-fuse serves it when given
// "/dev/fd/N" as its mount point (with DirectMount off), and Start
// registers the rings on it. Root only, like any direct mount.
func Mount(mountpoint string, mo *fuse.MountOptions) (int, error) {
	var st unix.Stat_t
	if err := unix.Stat(mountpoint, &st); err != nil {
		return -1, err
	}
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	data := []string{
		fmt.Sprintf("fd=%d", fd),
		fmt.Sprintf("rootmode=%o", st.Mode&syscall.S_IFMT),
		fmt.Sprintf("user_id=%d", os.Geteuid()),
		fmt.Sprintf("group_id=%d", os.Getegid()),
		fmt.Sprintf("max_read=%d", mo.MaxWrite),
	}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if mo.DirectMountFlags != 0 {
		flags = mo.DirectMountFlags
	}
	for _, o := range mo.Options {
		switch o {
		case "nodev":
			flags |= unix.MS_NODEV
		case "dev":
			flags &^= unix.MS_NODEV
		case "nosuid":
			flags |= unix.MS_NOSUID
		case "suid":
			flags &^= unix.MS_NOSUID
		case "noexec":
			flags |= unix.MS_NOEXEC
		case "exec":
			flags &^= unix.MS_NOEXEC
		default:
			data = append(data, o)
		}
	}
	if mo.AllowOther {
		data = append(data, "allow_other")
	}
	if err := unix.Mount(mo.FsName, mountpoint, "fuse."+mo.Name, flags, strings.Join(data, ",")); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// PollHack has the kernel learn, at once, that the file system does not
// poll: go-fuse answers POLL with ENOSYS, after which the kernel sends no
// more. Without it, the first POLL comes whenever a Go program registers
// a file of the mount with its poller (os.Open does) - in the daemon's
// own process too, where the thread that asked holds a P until the
// answer comes, which can leave a ring's thread without one to answer
// with: a deadlock (seen in the overlay's tests). go-fuse's WaitMount
// does the same, but not for a mount it was given as /dev/fd/N. Call it
// once the rings serve.
func PollHack(mountpoint string) error {
	// go-fuse answers this name in the root itself (fuse/poll.go).
	fd, err := unix.Open(mountpoint+"/.go-fuse-epoll-hack", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("fuse over io_uring: poll probe: %w", err)
	}
	unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLPRI | unix.POLLOUT}}, 0)
	unix.Close(fd)
	return nil
}
