package wire

// Connection and request-memory limits shared by a broker's client listeners: Kafka's
// ConnectionQuotas (max.connections, max.connections.per.ip,
// max.connections.per.ip.overrides) and the SocketServer's MemoryPool
// (queued.max.request.bytes). See docs/broker.md, "Resource limits".

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
)

// Limits bounds the connections and the request bytes of the Servers that share it.
// The zero value (and nil) limits nothing. Safe for concurrent use.
type Limits struct {
	// MaxConnections is max.connections: while this many connections are open, the
	// Servers stop accepting (new connections wait in the listen backlog), as Kafka's
	// Acceptor does. ≤0: no limit.
	MaxConnections int
	// MaxConnectionsPerIP is max.connections.per.ip: a new connection from an IP that
	// already has this many is closed at once. ≤0: no limit.
	MaxConnectionsPerIP int
	// PerIPOverrides is max.connections.per.ip.overrides parsed (ParseIPOverrides): the
	// per-IP limit of the IPs (or host names, as given) it lists.
	PerIPOverrides map[string]int
	// QueuedMaxRequestBytes is queued.max.request.bytes: the bytes of requests read but
	// not yet answered, across connections. A connection reads its next request only
	// when fewer are in use (one request may take the pool past it, as Kafka's
	// non-strict pool allows, so that a frame larger than the pool is still served).
	// ≤0: no limit.
	QueuedMaxRequestBytes int64

	once    sync.Once
	slots   chan struct{} // one token per open connection when MaxConnections > 0
	mu      sync.Mutex
	perIP   map[string]int
	used    int64
	waiting int           // connections waiting in reserve for request bytes
	freed   chan struct{} // closed (and replaced) when request bytes are released
}

func (l *Limits) init() {
	l.once.Do(func() {
		if l.MaxConnections > 0 {
			l.slots = make(chan struct{}, l.MaxConnections)
		}
		l.perIP = map[string]int{}
		l.freed = make(chan struct{})
	})
}

// ParseIPOverrides parses max.connections.per.ip.overrides: comma-separated
// "host-or-ip:limit" entries, as Kafka's ConnectionQuotas reads them; a host name is
// resolved once, here, and its limit applies to each of its addresses.
func ParseIPOverrides(s string) (map[string]int, error) {
	out := map[string]int{}
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		i := strings.LastIndexByte(e, ':')
		if i <= 0 {
			return nil, fmt.Errorf("max.connections.per.ip.overrides: %q is not host:limit", e)
		}
		n, err := strconv.Atoi(e[i+1:])
		if err != nil || n < 0 {
			return nil, fmt.Errorf("max.connections.per.ip.overrides: %q has no valid limit", e)
		}
		host := strings.Trim(e[:i], "[]")
		if net.ParseIP(host) != nil {
			out[host] = n
			continue
		}
		ips, err := net.LookupHost(host)
		if err != nil {
			return nil, fmt.Errorf("max.connections.per.ip.overrides: %w", err)
		}
		for _, ip := range ips {
			out[ip] = n
		}
	}
	return out, nil
}

// acquireSlot waits for room under MaxConnections; false when ctx ended first.
func (l *Limits) acquireSlot(ctx context.Context) bool {
	if l == nil {
		return true
	}
	l.init()
	if l.slots == nil {
		return true
	}
	select {
	case l.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// releaseSlot gives back a slot taken by acquireSlot.
func (l *Limits) releaseSlot() {
	if l == nil || l.slots == nil {
		return
	}
	<-l.slots
}

// perIPLimit is the connection limit of ip: its override, else MaxConnectionsPerIP.
func (l *Limits) perIPLimit(ip string) int {
	if n, ok := l.PerIPOverrides[ip]; ok {
		return n
	}
	return l.MaxConnectionsPerIP
}

// addIP counts a new connection from ip; false (and nothing counted) when ip is at its
// limit.
func (l *Limits) addIP(ip string) bool {
	if l == nil {
		return true
	}
	l.init()
	lim := l.perIPLimit(ip)
	_, overridden := l.PerIPOverrides[ip]
	l.mu.Lock()
	defer l.mu.Unlock()
	if (lim > 0 || overridden) && l.perIP[ip] >= lim {
		return false
	}
	l.perIP[ip]++
	return true
}

// removeIP uncounts a connection counted by addIP.
func (l *Limits) removeIP(ip string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perIP[ip]--; l.perIP[ip] <= 0 {
		delete(l.perIP, ip)
	}
}

// reserve takes n request bytes, waiting while the pool is used up; false when ctx
// ended first.
func (l *Limits) reserve(ctx context.Context, n int64) bool {
	if l == nil || l.QueuedMaxRequestBytes <= 0 {
		return true
	}
	l.init()
	for {
		l.mu.Lock()
		if l.used < l.QueuedMaxRequestBytes {
			l.used += n
			l.mu.Unlock()
			return true
		}
		freed := l.freed
		l.waiting++
		l.mu.Unlock()
		var ended bool
		select {
		case <-freed:
		case <-ctx.Done():
			ended = true
		}
		l.mu.Lock()
		l.waiting--
		l.mu.Unlock()
		if ended {
			return false
		}
	}
}

// release gives back n bytes taken by reserve.
func (l *Limits) release(n int64) {
	if l == nil || l.QueuedMaxRequestBytes <= 0 || n == 0 {
		return
	}
	l.mu.Lock()
	l.used -= n
	close(l.freed)
	l.freed = make(chan struct{})
	l.mu.Unlock()
}
