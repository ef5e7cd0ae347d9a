//go:build !pprof

package main

import (
	"context"

	"github.com/rs/zerolog"
)

// serveProfiles does nothing: the profiling endpoints exist only in a
// binary built with -tags pprof (profiling.go).
func serveProfiles(context.Context, zerolog.Logger) error { return nil }
