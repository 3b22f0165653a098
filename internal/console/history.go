package console

import (
	"strconv"
	"strings"
	"sync"
	"time"
)

// HistoryWindow is how far back the lag graphs reach.
const HistoryWindow = time.Hour

// Sample is one point of a mirror's lag history: Unix milliseconds, the records a
// failover would lose then, and the largest seconds-behind (-1 when unknown).
type Sample struct {
	TimeMs        int64   `json:"timeMs"`
	LagRecords    int64   `json:"lagRecords"`
	SecondsBehind float64 `json:"secondsBehind"`
}

// ring is a fixed-size ring buffer of samples, oldest overwritten first.
type ring struct {
	buf  []Sample
	next int
	full bool
}

func (r *ring) add(s Sample) {
	r.buf[r.next] = s
	r.next = (r.next + 1) % len(r.buf)
	if r.next == 0 {
		r.full = true
	}
}

// ordered returns the samples oldest first.
func (r *ring) ordered() []Sample {
	if !r.full {
		return append([]Sample(nil), r.buf[:r.next]...)
	}
	return append(append([]Sample(nil), r.buf[r.next:]...), r.buf[:r.next]...)
}

// history keeps each mirror's lag samples of the last HistoryWindow in memory: one ring
// of HistoryWindow/interval samples per mirror, dropped with the mirror.
type history struct {
	mu    sync.Mutex
	size  int
	rings map[string]*ring
}

func newHistory(interval time.Duration) *history {
	return &history{size: max(2, int(HistoryWindow/interval)), rings: map[string]*ring{}}
}

// record adds one sample per mirror of views and forgets the mirrors no longer there.
func (h *history) record(now time.Time, views []MirrorView) {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := make(map[string]bool, len(views))
	for _, v := range views {
		seen[v.Name] = true
		r := h.rings[v.Name]
		if r == nil {
			r = &ring{buf: make([]Sample, h.size)}
			h.rings[v.Name] = r
		}
		r.add(Sample{TimeMs: now.UnixMilli(), LagRecords: v.FailoverLossRecords, SecondsBehind: v.MaxSecondsBehind})
	}
	for name := range h.rings {
		if !seen[name] {
			delete(h.rings, name)
		}
	}
}

// samples returns mirror's samples, oldest first.
func (h *history) samples(mirror string) []Sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.rings[mirror]; r != nil {
		return r.ordered()
	}
	return []Sample{}
}

// Graph is a lag graph laid out for the page's inline SVG: the polyline's points in a
// GraphWidth×GraphHeight box (time on x over the last HistoryWindow, lag in records on y
// from 0 to MaxLag) and the latest value.
type Graph struct {
	Points  string
	MaxLag  int64
	Latest  int64
	Samples int
}

// Size of the graph's drawing box, in SVG user units.
const (
	GraphWidth  = 600
	GraphHeight = 100
)

// graphPad keeps the line off the box's top and bottom edges.
const graphPad = 4

// renderGraph lays samples out for the SVG polyline.
func renderGraph(samples []Sample, now time.Time) Graph {
	g := Graph{Samples: len(samples), MaxLag: 1}
	for _, s := range samples {
		g.MaxLag = max(g.MaxLag, s.LagRecords)
	}
	if len(samples) > 0 {
		g.Latest = samples[len(samples)-1].LagRecords
	}
	start := now.Add(-HistoryWindow).UnixMilli()
	var b strings.Builder
	for i, s := range samples {
		x := float64(s.TimeMs-start) / float64(HistoryWindow.Milliseconds()) * GraphWidth
		y := GraphHeight - graphPad - float64(s.LagRecords)/float64(g.MaxLag)*(GraphHeight-2*graphPad)
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatFloat(max(0, min(GraphWidth, x)), 'f', 1, 64))
		b.WriteByte(',')
		b.WriteString(strconv.FormatFloat(y, 'f', 1, 64))
	}
	g.Points = b.String()
	return g
}
