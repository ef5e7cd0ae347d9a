//go:build !pprof

package main

import (
	"context"
	"net"
	"strconv"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/clerum/hcc/internal/testing/testenv"
)

// The shipped binary serves no profiles, whatever its environment says.
func TestProfilingIsNotBuiltIn(t *testing.T) {
	port := testenv.FreePort(t)
	t.Setenv("HCC_API_PPROF_ADDR", "127.0.0.1:"+strconv.Itoa(port))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, serveProfiles(ctx, zerolog.Nop()))
	lis, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	require.NoError(t, err, "nothing listens on the profiling address")
	require.NoError(t, lis.Close())
}
