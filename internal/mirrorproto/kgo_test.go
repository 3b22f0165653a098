package mirrorproto

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeBroker is a tiny Kafka-protocol server on a real loopback socket. It
// answers ApiVersions (listing the keys in advertise), Metadata (itself as
// the only broker) and DescribeClusterMirrors; any other key closes the
// connection. It records the keys it received.
type fakeBroker struct {
	ln        net.Listener
	advertise []int16
	describe  *DescribeClusterMirrorsResponse

	mu   sync.Mutex
	seen []int16
	got  []kmsg.Request
}

func startFakeBroker(t *testing.T, advertise []int16, describe *DescribeClusterMirrorsResponse) *fakeBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeBroker{ln: ln, advertise: advertise, describe: describe}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go b.serve(c)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return b
}

func (b *fakeBroker) keysSeen() []int16 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int16(nil), b.seen...)
}

func (b *fakeBroker) serve(c net.Conn) {
	defer c.Close()
	for {
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c, frame); err != nil {
			return
		}
		key := int16(binary.BigEndian.Uint16(frame[0:]))
		version := int16(binary.BigEndian.Uint16(frame[2:]))
		corr := binary.BigEndian.Uint32(frame[4:])
		clientIDLen := int16(binary.BigEndian.Uint16(frame[8:]))
		body := frame[10:]
		if clientIDLen > 0 {
			body = body[clientIDLen:]
		}
		b.mu.Lock()
		b.seen = append(b.seen, key)
		b.mu.Unlock()

		req := NewRequest(key)
		if req == nil {
			req = kmsg.RequestForKey(key)
		}
		if req == nil {
			return
		}
		req.SetVersion(version)
		if req.IsFlexible() {
			body = body[1:] // empty tagged fields of request header v2
		}
		if err := req.ReadFrom(body); err != nil {
			return
		}
		b.mu.Lock()
		b.got = append(b.got, req)
		b.mu.Unlock()

		var resp kmsg.Response
		switch r := req.(type) {
		case *kmsg.ApiVersionsRequest:
			av := kmsg.NewPtrApiVersionsResponse()
			// Key 0 (Produce) must be listed: kgo treats a table without
			// it as "versions not loaded" and then sends any key unchecked.
			for _, k := range append([]int16{0, 18, 3}, b.advertise...) {
				max := int16(0)
				switch k {
				case 18:
					max = 4
				case 3:
					max = 12
				}
				av.ApiKeys = append(av.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MaxVersion: max})
			}
			resp = av
			if r.Version > 4 {
				av.ErrorCode = 35 // UNSUPPORTED_VERSION: the client retries at v4 or below
				version = 0
			}
		case *kmsg.MetadataRequest:
			md := kmsg.NewPtrMetadataResponse()
			host, port, _ := net.SplitHostPort(b.ln.Addr().String())
			var p int32
			for _, ch := range port {
				p = p*10 + int32(ch-'0')
			}
			md.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 1, Host: host, Port: p}}
			md.ControllerID = 1
			resp = md
		case *DescribeClusterMirrorsRequest:
			resp = b.describe
		default:
			return
		}
		resp.SetVersion(version)
		out := binary.BigEndian.AppendUint32(nil, corr)
		if resp.IsFlexible() && key != 18 {
			out = append(out, 0)
		}
		out = resp.AppendTo(out)
		out = append(binary.BigEndian.AppendUint32(nil, uint32(len(out))), out...)
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

func newTestClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append(opts, kgo.SeedBrokers(addr), kgo.RequestRetries(1), kgo.DialTimeout(5*time.Second))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestKgoSendsMirrorRPC proves that franz-go's kgo client sends a request
// with a key it does not know (1099) to a broker whose ApiVersions lists it,
// and decodes the flexible response with our ReadFrom.
func TestKgoSendsMirrorRPC(t *testing.T) {
	want := NewDescribeClusterMirrorsResponse()
	want.MaxRetryAttempts = 20
	p := NewDescribeClusterMirrorsResponsePartition(0)
	p.State, p.SourceOffset, p.DestinationOffset, p.Lag, p.SkippedOffsets = StateMirroring, 10, 8, 2, 3
	want.Mirrors = []DescribeClusterMirrorsResponseMirror{{MirrorName: "m", SourceBootstrap: "src:9092", SourceClusterID: "abc",
		Topics: []DescribeClusterMirrorsResponseTopic{{TopicName: "orders", TopicID: id1, Partitions: []DescribeClusterMirrorsResponsePartition{p}}}}}
	b := startFakeBroker(t, []int16{ServedKey(protoDescribeClusterMirrors)}, want)
	cl := newTestClient(t, b.ln.Addr().String(), kgo.MaxVersions(ClientVersions()))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := &DescribeClusterMirrorsRequest{MirrorNames: []string{"m"}, ClusterID: sp("dest")}
	resp, err := cl.Request(ctx, req)
	if err != nil {
		t.Fatalf("Request: %v", err)
	}
	got, ok := resp.(*DescribeClusterMirrorsResponse)
	if !ok {
		t.Fatalf("response type %T", resp)
	}
	if len(got.Mirrors) != 1 || got.Mirrors[0].Topics[0].Partitions[0] != p || got.MaxRetryAttempts != 20 || got.Mirrors[0].Topics[0].TopicID != id1 {
		t.Fatalf("decoded %+v", got)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var sent *DescribeClusterMirrorsRequest
	for _, r := range b.got {
		if d, ok := r.(*DescribeClusterMirrorsRequest); ok {
			sent = d
		}
	}
	if sent == nil || sent.ClusterID == nil || *sent.ClusterID != "dest" || sent.MirrorNames[0] != "m" {
		t.Fatalf("server decoded %+v", sent)
	}
}

// TestKgoRefusesUnadvertisedKey records what kgo does when the broker's
// ApiVersions does not list a mirror key: kgo (v1.22) fails the request
// locally with "broker is too old; the broker has already indicated it will
// not know how to handle the request" (errBrokerTooOld), without writing it
// to the socket. (kgo only checks when the table lists key 0, Produce, as
// every real broker's does.) So a kmirror broker must advertise keys 1094–1106 in
// ApiVersions for kgo-based tools (including `kmirror mirrors`) to work.
func TestKgoRefusesUnadvertisedKey(t *testing.T) {
	b := startFakeBroker(t, nil, NewDescribeClusterMirrorsResponse())
	cl := newTestClient(t, b.ln.Addr().String(), kgo.MaxVersions(ClientVersions()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := cl.Request(ctx, &DescribeClusterMirrorsRequest{})
	if err == nil || !strings.Contains(err.Error(), "too old") {
		t.Fatalf("err = %v, want kgo's broker-too-old error", err)
	}
	for _, k := range b.keysSeen() {
		if k == ServedKey(protoDescribeClusterMirrors) {
			t.Fatal("kgo sent an unadvertised key")
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("timed out instead of failing fast")
	}
}

// TestKgoDefaultVersionsRefuseMirrorKeys records that a kgo client with its
// default version table (kversion.Stable) refuses any key it does not know,
// even one the broker advertises: "request key is unknown". Hence
// ClientVersions.
func TestKgoDefaultVersionsRefuseMirrorKeys(t *testing.T) {
	b := startFakeBroker(t, []int16{ServedKey(protoDescribeClusterMirrors)}, NewDescribeClusterMirrorsResponse())
	cl := newTestClient(t, b.ln.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := cl.Request(ctx, &DescribeClusterMirrorsRequest{})
	if err == nil || !strings.Contains(err.Error(), "request key is unknown") {
		t.Fatalf("err = %v, want kgo's unknown-key error", err)
	}
}
