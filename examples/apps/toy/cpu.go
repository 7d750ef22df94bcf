package main

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU returns the CPU time the calling OS thread has used. It is only
// meaningful while the goroutine is locked to its thread.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic("clock_gettime(CLOCK_THREAD_CPUTIME_ID): " + err.Error())
	}
	return time.Duration(ts.Nano())
}

// burnCPU spins until the calling thread has used d of CPU time. Counting CPU
// time rather than wall time makes a request cost the same CPU whether the
// machine is idle or contended, so a toggle's overhead is a known constant.
// It returns a value computed by the spin so the loop cannot be optimised away.
func burnCPU(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	end := threadCPU() + d
	x := uint64(88172645463325252)
	for {
		// A few microseconds of arithmetic between clock reads keeps the
		// clock_gettime syscalls a small part of the burn.
		for range 2000 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
		if threadCPU() >= end {
			return x
		}
	}
}
