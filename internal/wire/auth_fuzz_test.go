package wire_test

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/security"
	"github.com/kmirror/kmirror/internal/wire"
)

// FuzzSASLAuthentication writes arbitrary bytes to a SASL listener (PLAIN and
// SCRAM-SHA-256) before authentication and closes its side: the server must answer or
// close without panicking, and keep serving a new connection's ApiVersions.
func FuzzSASLAuthentication(f *testing.F) {
	cred, err := security.NewScramCredential("SCRAM-SHA-256", "alice-secret", 4096)
	if err != nil {
		f.Fatal(err)
	}
	users := map[string]string{"alice": "alice-secret"}
	lookup := func(_, user string) (security.ScramCredential, bool) { return cred, user == "alice" }
	_, addr := serve(f, &wire.Security{
		Mechanisms: []string{"PLAIN", "SCRAM-SHA-256"},
		NewExchange: func(m string) wire.SASLExchange {
			if m == "PLAIN" {
				return security.NewPlainExchange(users)
			}
			e, _ := security.NewScramExchange(m, lookup)
			return e
		},
	})
	hs := func(v int16, mech string) []byte {
		r := kmsg.NewPtrSASLHandshakeRequest()
		r.Mechanism = mech
		return frame(17, v, 1, body(r, v))
	}
	auth := func(token string) []byte {
		r := kmsg.NewPtrSASLAuthenticateRequest()
		r.SASLAuthBytes = []byte(token)
		return frame(36, 1, 2, body(r, 1))
	}
	raw := func(token string) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(token))), token...)
	}
	f.Add(append(hs(1, "PLAIN"), auth("\x00alice\x00alice-secret")...))
	f.Add(append(hs(1, "SCRAM-SHA-256"), auth("n,,n=alice,r=abcdefgh")...))
	f.Add(append(hs(1, "SCRAM-SHA-256"), auth("n,,n=alice,r=abcdefgh")[:20]...))
	f.Add(append(hs(0, "PLAIN"), raw("\x00alice\x00wrong")...))
	f.Add(append(hs(0, "SCRAM-SHA-256"), raw("c=biws,r=x,p=AAAA")...))
	f.Add(auth("\x00alice\x00alice-secret"))
	f.Add([]byte{0, 0, 0, 9, 0, 17, 0, 1, 0, 0, 0, 1, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write(in)
		c.(*net.TCPConn).CloseWrite()
		// Whatever the server answers, it closes once the input is consumed.
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Fatalf("the server kept the connection open: %v", err)
		}
		ok, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer ok.Close()
		ok.Write(frame(18, 0, 1, body(kmsg.NewPtrApiVersionsRequest(), 0)))
		readFrame(t, ok)
	})
}
