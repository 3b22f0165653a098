// Package console is the broker's status console: the HTTP listener of the broker config
// metrics.listener, serving an HTML page of the cluster, its topics, consumer groups with
// lag and cluster mirrors (partition states, lag in records and seconds, the data a
// failover would lose now, sync tasks, FAILED partitions, the last failback's truncation
// report, lag graphs of the last hour), its JSON API (/api/cluster, /api/topics,
// /api/groups, /api/mirrors), /healthz, /readyz and the Prometheus metrics at /metrics
// (internal/metrics). Pages are rendered server-side with html/template from assets
// embedded with go:embed; the lag history is kept in memory only. docs/console.md
// describes the pages and endpoints.
package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/broker"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/metrics"
)

// ConfigKey is the broker config naming the console's listener (host:port; empty: off).
const ConfigKey = metrics.ConfigKey

// DefaultListener is the console's listener of `kmirror serve` on its embedded defaults
// (no --config): the client listener localhost:9092 plus 100.
const DefaultListener = "localhost:9192"

// Broker is what the console reads: the metadata image and controller, the mirroring
// service, and this broker's node ID and client address (for a client of its own cluster:
// consumer groups and their lag). *broker.Broker implements it.
type Broker interface {
	NodeID() int32
	Addr() string
	Metadata() *metadata.Controller
	MirrorService() broker.Mirrors
}

// Options tune a Server; the zero value is the broker's.
type Options struct {
	// SampleInterval is the period of the lag history's samples; 0 is 10 s (360 samples
	// an hour per mirror).
	SampleInterval time.Duration
}

//go:embed web
var web embed.FS

// static is web/ as served: /static/console.css is web/static/console.css.
var static = func() fs.FS {
	sub, err := fs.Sub(web, "web")
	if err != nil {
		panic(err)
	}
	return sub
}()

var page = template.Must(template.New("index.html").Funcs(template.FuncMap{
	"count":  func(n int64) string { return countText(n) },
	"secs":   secondsText,
	"millis": millisText,
}).ParseFS(web, "web/index.html"))

// Server is a running console.
type Server struct {
	b       Broker
	srv     *http.Server
	ln      net.Listener
	history *history
	stop    chan struct{}
	done    chan struct{}

	admOnce sync.Once
	adm     *kadm.Client
	admCl   *kgo.Client
	admErr  error
}

// Start listens on addr (host:port; port 0 picks a free port) and serves b's console
// until Close. A listener that cannot bind is returned as the error.
func Start(addr string, b Broker, logger *slog.Logger, o Options) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	interval := o.SampleInterval
	if interval <= 0 {
		interval = 10 * time.Second
	}
	s := &Server{b: b, ln: ln, history: newHistory(interval), stop: make(chan struct{}), done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.index)
	mux.Handle("GET /static/", http.FileServerFS(static))
	mux.HandleFunc("GET /api/cluster", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.clusterView()) })
	mux.HandleFunc("GET /api/topics", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.topicViews()) })
	mux.HandleFunc("GET /api/groups", s.groups)
	mux.HandleFunc("GET /api/mirrors", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, s.mirrorViews(r.Context())) })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET "+metrics.Path, metrics.Handler(metrics.NewRegistry(b)))
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("console listener failed", "addr", addr, "err", err)
		}
	}()
	go s.sample(interval)
	logger.Info("serving the status console", "url", s.URL())
	return s, nil
}

// URL is the console's address, http://host:port.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Addr is the host:port the console listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the console, waiting up to ctx for in-flight requests.
func (s *Server) Close(ctx context.Context) error {
	close(s.stop)
	<-s.done
	err := s.srv.Shutdown(ctx)
	s.admOnce.Do(func() {}) // orders the read of admCl after a handler's creation of it
	if s.admCl != nil {
		s.admCl.Close()
	}
	return err
}

// sample records the mirrors' lag every interval, the first at once.
func (s *Server) sample(interval time.Duration) {
	defer close(s.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), interval)
		views := s.mirrorViews(ctx)
		cancel()
		s.history.record(time.Now(), views)
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

// pageData is what index.html renders.
type pageData struct {
	Cluster     ClusterView
	Topics      []TopicView
	Groups      []GroupView
	GroupsError string
	Mirrors     []MirrorView
	Now         string
	GraphWidth  int
	GraphHeight int
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	d := pageData{Cluster: s.clusterView(), Topics: s.topicViews(), Mirrors: s.mirrorViews(ctx),
		Now: time.Now().UTC().Format(time.RFC3339), GraphWidth: GraphWidth, GraphHeight: GraphHeight}
	groups, err := s.groupViews(ctx)
	if err != nil {
		d.GroupsError = err.Error()
	}
	d.Groups = groups
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := page.Execute(w, d); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

func (s *Server) groups(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	groups, err := s.groupViews(ctx)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, groups)
}

// readyz answers 200 when the broker serves: it knows its cluster ID and an active
// controller, and is registered and not fenced in the metadata image; 503 with the
// reason otherwise.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	im := s.b.Metadata().Image()
	reason := ""
	if _, _, ok := s.b.Metadata().Leader(); !ok {
		reason = "no active controller known"
	} else if im.ClusterID == "" {
		reason = "metadata not caught up: no cluster ID yet"
	} else if br := im.Brokers[s.b.NodeID()]; br == nil {
		reason = "broker " + strconv.Itoa(int(s.b.NodeID())) + " not registered yet"
	} else if br.Fenced {
		reason = "broker " + strconv.Itoa(int(s.b.NodeID())) + " is fenced"
	}
	if reason != "" {
		http.Error(w, reason, http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("ready\n"))
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// newAdmin is a kadm client bootstrapped at addr.
func newAdmin(addr string) (*kadm.Client, *kgo.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("kmirror-console"),
		kgo.DialTimeout(5*time.Second), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl, nil
}

// countText is n, or "–" when negative (unknown).
func countText(n int64) string {
	if n < 0 {
		return "–"
	}
	return strconv.FormatInt(n, 10)
}

// secondsText is f seconds with one decimal, or "–" when negative (unknown).
func secondsText(f float64) string {
	if f < 0 {
		return "–"
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + " s"
}

// millisText is Unix milliseconds as UTC time, or "never" when negative.
func millisText(ms int64) string {
	if ms < 0 {
		return "never"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05Z")
}

// itoa is strconv.FormatInt in base 10.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }
