//go:build pprof

package main

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/clerum/hcc/internal/testing/testenv"
)

// go test -tags pprof ./cmd/hcc-api/ -run Profiling
func TestProfilingServesOnLoopbackOnly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	t.Setenv(profilingAddrEnv, "")
	require.NoError(t, serveProfiles(ctx, zerolog.Nop()), "unset: nothing to serve")
	for _, addr := range []string{"0.0.0.0:6060", "10.0.0.1:6060", ":6060", "localhost"} {
		t.Setenv(profilingAddrEnv, addr)
		assert.Error(t, serveProfiles(ctx, zerolog.Nop()), addr)
	}

	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	t.Setenv(profilingAddrEnv, addr)
	require.NoError(t, serveProfiles(ctx, zerolog.Nop()))
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		resp, err := http.Get("http://" + addr + "/debug/pprof/allocs?debug=1")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}))
}
