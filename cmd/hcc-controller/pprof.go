package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/rs/zerolog"
)

// pprofTimeout bounds a profile request: a CPU profile runs for its
// seconds parameter (30 by default) before it answers.
const pprofTimeout = 2 * time.Minute

// pprofHandler serves the Go profiles under /debug/pprof/ (heap,
// goroutine, allocs, ... by name; profile for CPU; trace).
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// servePprof serves pprofHandler on 127.0.0.1:port until ctx is done
// (HCC_PPROF_PORT; docs/configuration.md). Only loopback: a profile shows
// what the caches hold, and nothing in the cluster should reach it.
func servePprof(ctx context.Context, log zerolog.Logger, port int32) error {
	srv := &http.Server{
		Addr:              net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))),
		Handler:           pprofHandler(),
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      pprofTimeout,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Warn().Str("address", srv.Addr).Msg("HCC_PPROF_PORT is set: serving Go profiles on loopback")
	select {
	case err := <-errc:
		return fmt.Errorf("profiles on %s: %w", srv.Addr, err)
	case <-ctx.Done():
	}
	if err := srv.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
