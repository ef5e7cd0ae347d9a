package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/go-logr/logr"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseLevel(t *testing.T) {
	tests := map[string]zerolog.Level{
		"debug":   zerolog.DebugLevel,
		"DEBUG":   zerolog.DebugLevel,
		"info":    zerolog.InfoLevel,
		"warn":    zerolog.WarnLevel,
		"error":   zerolog.ErrorLevel,
		"":        zerolog.InfoLevel,
		"verbose": zerolog.InfoLevel,
		"trace":   zerolog.InfoLevel,
	}
	for in, want := range tests {
		assert.Equal(t, want, ParseLevel(in), "LOG_LEVEL=%q", in)
	}
}

func TestNewWritesJSONToANonTerminal(t *testing.T) {
	var buf bytes.Buffer
	logger := New(&buf, "warn")
	logger.Info().Msg("dropped")
	logger.Warn().Str("server", "s1").Msg("kept")

	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line), "exactly one JSON line: %s", buf.String())
	assert.Equal(t, "kept", line["message"])
	assert.Equal(t, "s1", line["server"])
	assert.Equal(t, "warn", line["level"])
}

func TestKlogSinkRoutesThroughZerolog(t *testing.T) {
	var buf bytes.Buffer
	log := logr.New(&klogSink{logger: New(&buf, "info")})

	log.V(2).Info("routine detail")
	log.WithName("reflector").WithValues("resource", "mcpservers").Info("watch started", "count", 3, "dangling")
	log.Error(errors.New("boom"), "list failed")

	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	require.Len(t, lines, 2, "V(2) is debug and filtered at info: %s", buf.String())

	var info, failure map[string]any
	require.NoError(t, json.Unmarshal(lines[0], &info))
	require.NoError(t, json.Unmarshal(lines[1], &failure))
	assert.Equal(t, map[string]any{
		"level": "info", "message": "watch started", "logger": "reflector",
		"resource": "mcpservers", "count": float64(3), "dangling": "(MISSING)",
		"time": info["time"],
	}, info)
	assert.Equal(t, "error", failure["level"])
	assert.Equal(t, "boom", failure["error"])
}
