package netmux

import (
	"io"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peek returns the first byte of c without consuming it (recv with MSG_PEEK), waiting
// under c's read deadline. peeked is false when c is not a socket it can peek into; the
// caller then reads the byte instead.
func peek(c net.Conn) (b byte, peeked bool, err error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, false, nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	var buf [1]byte
	var n int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		for {
			n, _, rerr = unix.Recvfrom(int(fd), buf[:], unix.MSG_PEEK)
			if rerr != unix.EINTR {
				break
			}
		}
		return rerr != unix.EAGAIN // EAGAIN: wait until readable
	})
	switch {
	case err != nil: // read deadline, or c closed
		return 0, true, err
	case rerr != nil:
		return 0, true, rerr
	case n == 0:
		return 0, true, io.EOF
	}
	return buf[0], true, nil
}
