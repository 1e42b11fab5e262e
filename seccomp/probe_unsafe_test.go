package seccomp

import "unsafe"

// ptr passes a Go pointer as a raw syscall argument (the probes' ioctls).
func ptr[T any](p *T) uintptr { return uintptr(unsafe.Pointer(p)) }
