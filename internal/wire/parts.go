package wire

import (
	"bufio"
	"io"
	"net"
	"os"
)

// Part is one piece of a response body written by the connection loop: Bytes when
// File is nil, else Len bytes of File from byte position Pos, sent with sendfile(2)
// where the platform and connection allow it (the record batches of a Fetch response,
// Apache Kafka's TransferableRecords). The file is read only at explicit offsets,
// never through its shared seek position.
type Part struct {
	Bytes []byte
	File  *os.File
	Pos   int64 // byte position in File
	Len   int64 // bytes of File to send
}

// size is the number of bytes the part puts on the wire.
func (p *Part) size() int64 {
	if p.File != nil {
		return p.Len
	}
	return int64(len(p.Bytes))
}

// PartsResponse is implemented by a response that encodes its own body as parts
// instead of through kmsg's AppendTo (a Fetch response whose record batches are
// segment file ranges). BodyParts returns the body — everything after the response
// header — as parts written in order; it is called once, after SetVersion. A response
// that is also a Releaser is released once its parts are written, or when writing them
// fails.
type PartsResponse interface {
	BodyParts() []Part
}

// writeParts writes the parts of one response: byte parts through w, file parts with
// w flushed first and then straight to the socket (sendfile on Linux plaintext TCP
// connections, else pread and write through w, as over TLS).
func (c *conn) writeParts(w *bufio.Writer, parts []Part) error {
	for i := range parts {
		p := &parts[i]
		if p.File == nil {
			if _, err := w.Write(p.Bytes); err != nil {
				return err
			}
			continue
		}
		if p.Len == 0 {
			continue
		}
		// Over TLS rw is a *tls.Conn: the bytes are read and written through it.
		if tc, ok := c.rw.(*net.TCPConn); ok && sendfileSupported {
			if err := w.Flush(); err != nil {
				return err
			}
			sent, err := sendFile(tc, p.File, p.Pos, p.Len)
			if err == nil {
				continue
			}
			if err != errSendfileUnsupported {
				return err
			}
			// Nothing was sent (sendfile refuses this file): copy the rest instead.
			if err := c.copyFile(w, p.File, p.Pos+sent, p.Len-sent); err != nil {
				return err
			}
			continue
		}
		if err := c.copyFile(w, p.File, p.Pos, p.Len); err != nil {
			return err
		}
	}
	return nil
}

// copyFile writes n bytes of f from pos through w with pread (the fallback of sendfile).
func (c *conn) copyFile(w *bufio.Writer, f *os.File, pos, n int64) error {
	if c.copyBuf == nil {
		c.copyBuf = make([]byte, 128<<10)
	}
	for n > 0 {
		chunk := c.copyBuf[:min(n, int64(len(c.copyBuf)))]
		k, err := f.ReadAt(chunk, pos)
		if k < len(chunk) {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF // the file is shorter than the range
			}
			return err
		}
		if _, err := w.Write(chunk); err != nil {
			return err
		}
		pos += int64(k)
		n -= int64(k)
	}
	return nil
}
