package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/clerum/hcc/internal/testing/testenv"
)

// HCC_PPROF_PORT serves the heap profile on loopback only, and stops with
// its context.
func TestPprofServesProfilesOnLoopbackOnly(t *testing.T) {
	port := testenv.FreePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- servePprof(ctx, zerolog.Nop(), int32(port)) }()

	url := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap", port)
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		resp, err := http.Get(url)
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.NotEmpty(t, body)
		return true, nil
	}))
	// Bound to 127.0.0.1, not every address: another address of this
	// machine is refused.
	if other := nonLoopbackAddress(t); other != "" {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(other, fmt.Sprint(port)), time.Second)
		if err == nil {
			conn.Close()
			t.Fatalf("the profiles answer on %s", other)
		}
	}
	cancel()
	require.NoError(t, <-done)
}

// nonLoopbackAddress is an IPv4 address of this machine other than
// loopback, "" if it has none.
func nonLoopbackAddress(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && !ip.IP.IsLoopback() && ip.IP.To4() != nil {
			return ip.IP.String()
		}
	}
	return ""
}
