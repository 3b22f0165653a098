//go:build !linux

package wire

import (
	"errors"
	"net"
	"os"
)

const sendfileSupported = false

var errSendfileUnsupported = errors.New("sendfile not supported")

// sendFile is not used off Linux: file parts are copied with pread and write.
func sendFile(*net.TCPConn, *os.File, int64, int64) (int64, error) {
	return 0, errSendfileUnsupported
}
