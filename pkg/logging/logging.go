// Package logging builds the zerolog logger both binaries use and routes
// client-go's klog output into it, so every line a process writes has one
// format.
package logging

import (
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/rs/zerolog"
	"k8s.io/klog/v2"
)

// ParseLevel maps LOG_LEVEL to a zerolog level. Unknown values fall back to
// info (docs/configuration.md): a typo must not silence the process.
func ParseLevel(s string) zerolog.Level {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return zerolog.DebugLevel
	case "warn", "warning":
		return zerolog.WarnLevel
	case "error":
		return zerolog.ErrorLevel
	default:
		return zerolog.InfoLevel
	}
}

// New returns a logger writing to out at level: JSON lines, or a human
// console format when out is a terminal.
func New(out io.Writer, level string) zerolog.Logger {
	if isTerminal(out) {
		out = zerolog.ConsoleWriter{Out: out, TimeFormat: time.RFC3339}
	}
	return zerolog.New(out).Level(ParseLevel(level)).With().Timestamp().Logger()
}

// routeKlog guards klog's process-wide logger: klog reads it without a lock,
// so it is set once, before the first client exists, and never swapped.
var routeKlog sync.Once

// Setup returns the process logger (stderr) for component. The first call
// also makes klog write through that logger.
func Setup(component, level string) zerolog.Logger {
	logger := New(os.Stderr, level).With().Str("component", component).Logger()
	routeKlog.Do(func() {
		klog.SetLogger(logr.New(&klogSink{logger: logger.With().Str("source", "client-go").Logger()}))
	})
	return logger
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
