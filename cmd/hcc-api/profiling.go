//go:build pprof

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/rs/zerolog"
)

// profilingAddrEnv names the loopback address the profiling endpoints
// listen on. It is read only by a binary built with -tags pprof (the
// benchmarks' profiling runs, docs/http-api.md "Profiling"); the shipped
// binary has no profiling code and reads no such variable.
const profilingAddrEnv = "HCC_API_PPROF_ADDR"

// serveProfiles serves net/http/pprof on HCC_API_PPROF_ADDR until ctx
// ends, when the variable is set; unset, it does nothing. Only a loopback
// address is accepted: the profiles show the process's memory.
func serveProfiles(ctx context.Context, log zerolog.Logger) error {
	addr := os.Getenv(profilingAddrEnv)
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s: %w", profilingAddrEnv, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%s: %q is not a loopback address", profilingAddrEnv, addr)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: %w", profilingAddrEnv, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("profiling endpoints stopped")
		}
	}()
	log.Info().Str("addr", lis.Addr().String()).Msg("serving profiling endpoints (built with -tags pprof)")
	return nil
}
