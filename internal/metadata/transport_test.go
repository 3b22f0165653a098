package metadata

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kmirror/kmirror/internal/netmux"
)

// muxedStreamLayer returns a stream layer on the raft sub-listener of a Mux on 127.0.0.1,
// and the Mux's Kafka sub-listener.
func muxedStreamLayer(t *testing.T) (*streamLayer, net.Listener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := netmux.New(ln, slog.New(slog.DiscardHandler))
	kafka := m.Default()
	s := newStreamLayer(m.Claim(netmux.RaftByte), ln.Addr().String())
	go m.Serve()
	t.Cleanup(func() {
		s.Close()
		m.Close()
	})
	return s, kafka
}

func TestStreamLayer(t *testing.T) {
	s, kafka := muxedStreamLayer(t)
	if s.Addr().String() != kafka.Addr().String() || s.Addr().Network() != "tcp" {
		t.Fatalf("Addr = %v, want %v", s.Addr(), kafka.Addr())
	}

	// A dialled stream arrives on the raft side without its first byte.
	out, err := s.Dial(raft.ServerAddress(s.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := out.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	in, err := s.Accept()
	if err != nil {
		t.Fatal(err)
	}
	in.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, 5)
	if _, err := io.ReadFull(in, got); err != nil || string(got) != "hello" {
		t.Fatalf("read %q, %v", got, err)
	}
	if _, err := in.Write([]byte("back")); err != nil {
		t.Fatal(err)
	}
	out.SetReadDeadline(time.Now().Add(10 * time.Second))
	got = got[:4]
	if _, err := io.ReadFull(out, got); err != nil || string(got) != "back" {
		t.Fatalf("read %q, %v", got, err)
	}

	// Kafka traffic on the same port goes to the other side.
	kc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	kc.Write([]byte{0, 0, 0, 1})
	kin, err := kafka.Accept()
	if err != nil {
		t.Fatal(err)
	}
	kin.Close()

	// Close cuts the streams in progress and refuses new ones.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Read(got); err == nil {
		t.Fatal("accepted stream still open after Close")
	}
	if _, err := out.Read(got); err == nil {
		t.Fatal("dialled stream still open after Close")
	}
	if _, err := s.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
	if _, err := s.Dial(raft.ServerAddress(s.Addr().String()), time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Dial after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestStreamLayerRefusesOtherFirstByte(t *testing.T) {
	// Without a Mux, whatever connects reaches Accept: the first Read checks the byte.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := newStreamLayer(ln, ln.Addr().String())
	defer s.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte{0, 0, 0, 1})
	in, err := s.Accept()
	if err != nil {
		t.Fatal(err)
	}
	in.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := in.Read(make([]byte, 4)); err == nil {
		t.Fatal("a stream without the raft byte was read")
	}
}

func TestNetworkTransport(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	trans, s := newNetworkTransport(ln, "controller-1:9093", newRaftLogger(slog.New(slog.DiscardHandler)))
	if got := trans.LocalAddr(); got != "controller-1:9093" {
		t.Fatalf("LocalAddr = %s, want the advertised address", got)
	}
	if err := trans.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Accept(); err == nil {
		t.Fatal("the stream layer's listener survived the transport's Close")
	}
}
