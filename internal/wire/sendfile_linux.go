package wire

import (
	"errors"
	"io"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

const sendfileSupported = true

// errSendfileUnsupported: sendfile(2) refused the file before sending anything
// (EINVAL, ENOSYS, EOPNOTSUPP); the caller copies the bytes instead.
var errSendfileUnsupported = errors.New("sendfile not supported for this file")

// sendFile sends n bytes of f from byte position pos to tc with sendfile(2) and an
// explicit offset (the file's shared seek position is neither used nor moved), inside
// the connection's raw Write so that EAGAIN parks on the netpoller until the socket is
// writable; short writes continue where they stopped. It returns the bytes sent.
func sendFile(tc *net.TCPConn, f *os.File, pos, n int64) (int64, error) {
	out, err := tc.SyscallConn()
	if err != nil {
		return 0, err
	}
	in, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var sent int64
	var opErr error
	ctlErr := in.Control(func(infd uintptr) {
		off := pos
		werr := out.Write(func(outfd uintptr) bool {
			for sent < n {
				k, err := unix.Sendfile(int(outfd), int(infd), &off, int(min(n-sent, 1<<30)))
				if k > 0 {
					sent += int64(k)
				}
				switch {
				case err == unix.EAGAIN:
					return false // wait until writable
				case err == unix.EINTR:
					continue
				case err != nil:
					if sent == 0 && (err == unix.EINVAL || err == unix.ENOSYS || err == unix.EOPNOTSUPP) {
						opErr = errSendfileUnsupported
					} else {
						opErr = os.NewSyscallError("sendfile", err)
					}
					return true
				case k == 0:
					opErr = io.ErrUnexpectedEOF // the file is shorter than the range
					return true
				}
			}
			return true
		})
		if opErr == nil {
			opErr = werr
		}
	})
	if ctlErr != nil {
		return sent, ctlErr
	}
	return sent, opErr
}
