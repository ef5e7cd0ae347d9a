package logging

import (
	"fmt"

	"github.com/go-logr/logr"
	"github.com/rs/zerolog"
)

// klogSink is a logr.LogSink over zerolog, so klog (client-go's logger) writes
// through the process logger. klog verbosity 0 maps to info and every higher
// V-level to debug: client-go logs routine detail at V(2) and above, which an
// operator wants only when debugging.
type klogSink struct {
	logger zerolog.Logger
	name   string
}

var _ logr.LogSink = (*klogSink)(nil)

func (s *klogSink) Init(logr.RuntimeInfo) {}

func (s *klogSink) Enabled(level int) bool {
	return s.logger.GetLevel() <= levelFor(level)
}

func (s *klogSink) Info(level int, msg string, kv ...any) {
	s.logger.WithLevel(levelFor(level)).Fields(fields(kv)).Msg(msg)
}

func (s *klogSink) Error(err error, msg string, kv ...any) {
	s.logger.Error().Err(err).Fields(fields(kv)).Msg(msg)
}

func (s *klogSink) WithValues(kv ...any) logr.LogSink {
	return &klogSink{logger: s.logger.With().Fields(fields(kv)).Logger(), name: s.name}
}

func (s *klogSink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "/" + name
	}
	return &klogSink{logger: s.logger.With().Str("logger", name).Logger(), name: name}
}

// fields turns logr's alternating keys and values into a map; a dangling key
// is kept with a marker rather than dropped, as logr's own sinks do.
func fields(kv []any) map[string]any {
	m := make(map[string]any, (len(kv)+1)/2)
	for i := 0; i < len(kv); i += 2 {
		key := fmt.Sprint(kv[i])
		if i+1 < len(kv) {
			m[key] = kv[i+1]
		} else {
			m[key] = "(MISSING)"
		}
	}
	return m
}

func levelFor(v int) zerolog.Level {
	if v <= 0 {
		return zerolog.InfoLevel
	}
	return zerolog.DebugLevel
}
