package metadata

import (
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// slogHclog adapts a *slog.Logger to hclog.Logger for hashicorp/raft. Raft's own messages
// (including its routine warnings, such as starting an election) go out at slog's debug
// level; only raft errors use slog's error level, so a broker is quiet by default.
type slogHclog struct {
	base *slog.Logger // without name and args
	l    *slog.Logger // base with name and args
	name string
	args []any
}

func newRaftLogger(l *slog.Logger) hclog.Logger {
	return newSlogHclog(l, "raft", nil)
}

func newSlogHclog(base *slog.Logger, name string, args []any) *slogHclog {
	return &slogHclog{base: base, l: base.With("logger", name).With(args...), name: name, args: args}
}

func slogLevel(level hclog.Level) slog.Level {
	if level >= hclog.Error {
		return slog.LevelError
	}
	return slog.LevelDebug
}

func (s *slogHclog) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off {
		return
	}
	s.l.Log(context.Background(), slogLevel(level), msg, args...)
}

func (s *slogHclog) Trace(msg string, args ...any) { s.Log(hclog.Trace, msg, args...) }
func (s *slogHclog) Debug(msg string, args ...any) { s.Log(hclog.Debug, msg, args...) }
func (s *slogHclog) Info(msg string, args ...any)  { s.Log(hclog.Info, msg, args...) }
func (s *slogHclog) Warn(msg string, args ...any)  { s.Log(hclog.Warn, msg, args...) }
func (s *slogHclog) Error(msg string, args ...any) { s.Log(hclog.Error, msg, args...) }

func (s *slogHclog) enabled(level hclog.Level) bool {
	return s.l.Enabled(context.Background(), slogLevel(level))
}

func (s *slogHclog) IsTrace() bool { return s.enabled(hclog.Trace) }
func (s *slogHclog) IsDebug() bool { return s.enabled(hclog.Debug) }
func (s *slogHclog) IsInfo() bool  { return s.enabled(hclog.Info) }
func (s *slogHclog) IsWarn() bool  { return s.enabled(hclog.Warn) }
func (s *slogHclog) IsError() bool { return s.enabled(hclog.Error) }

func (s *slogHclog) ImpliedArgs() []any { return s.args }

func (s *slogHclog) With(args ...any) hclog.Logger {
	return newSlogHclog(s.base, s.name, append(append([]any{}, s.args...), args...))
}

func (s *slogHclog) Name() string { return s.name }

func (s *slogHclog) Named(name string) hclog.Logger {
	n := name
	if s.name != "" {
		n = s.name + "." + name
	}
	return s.ResetNamed(n)
}

func (s *slogHclog) ResetNamed(name string) hclog.Logger {
	return newSlogHclog(s.base, name, s.args)
}

// SetLevel is a no-op: the slog handler decides what is written.
func (s *slogHclog) SetLevel(hclog.Level) {}

func (s *slogHclog) GetLevel() hclog.Level {
	if s.IsDebug() {
		return hclog.Trace
	}
	return hclog.Error
}

func (s *slogHclog) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(s.StandardWriter(opts), "", 0)
}

func (s *slogHclog) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return slogWriter{s}
}

// slogWriter writes each line given to it as one debug message.
type slogWriter struct{ s *slogHclog }

func (w slogWriter) Write(p []byte) (int, error) {
	msg := string(p)
	for len(msg) > 0 && msg[len(msg)-1] == '\n' {
		msg = msg[:len(msg)-1]
	}
	w.s.Log(hclog.Debug, msg)
	return len(p), nil
}
