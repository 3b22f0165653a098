//go:build !linux

package netmux

import "net"

// peek does not peek off Linux: the caller reads the first byte and replays it.
func peek(net.Conn) (byte, bool, error) { return 0, false, nil }
