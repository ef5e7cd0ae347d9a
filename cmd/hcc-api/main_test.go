package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/clerum/hcc/internal/testing/testenv"
)

func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 0, run(context.Background(), []string{"--version"}, &stdout, &stderr))
	assert.Equal(t, "hcc-api dev (commit unknown)\n", stdout.String())
}

func TestPublicKeyIsRequiredEvenInDevMode(t *testing.T) {
	t.Setenv("CLERUM_DEV_MODE", "true")
	t.Setenv("HCC_MCP_HOST_JWT_PUBLIC_KEY", "")

	var stdout, stderr bytes.Buffer
	assert.Equal(t, 1, run(context.Background(), nil, &stdout, &stderr))
	out := stderr.String()
	assert.Equal(t, 1, strings.Count(out, "\n"), "one line: %q", out)
	assert.Contains(t, out, "HCC_MCP_HOST_JWT_PUBLIC_KEY")
}

func TestUnreachableClusterExits(t *testing.T) {
	t.Setenv("HCC_MCP_HOST_JWT_PUBLIC_KEY", testenv.RSAPublicKeyPEM(t))
	t.Setenv("CONTEXT_MAPPER_PORT", strconv.Itoa(testenv.FreePort(t)))

	var stdout, stderr bytes.Buffer
	assert.Equal(t, 1, run(context.Background(), []string{"--kubeconfig", testenv.UnreachableKubeconfig(t)}, &stdout, &stderr))
}

func TestDevModeServesHealthWithoutACluster(t *testing.T) {
	port := testenv.FreePort(t)
	t.Setenv("CLERUM_DEV_MODE", "true")
	t.Setenv("HCC_MCP_HOST_JWT_PUBLIC_KEY", testenv.RSAPublicKeyPEM(t))
	t.Setenv("CONTEXT_MAPPER_PORT", strconv.Itoa(port))
	t.Setenv("KUBECONFIG", testenv.UnreachableKubeconfig(t))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		var stdout, stderr bytes.Buffer
		done <- run(ctx, nil, &stdout, &stderr)
	}()

	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	assert.Equal(t, http.StatusOK, testenv.WaitHTTP(base+"/health", http.StatusOK, 10*time.Second))
	// The API routes arrive with their own issue; until then it is not ready.
	assert.Equal(t, http.StatusServiceUnavailable, testenv.WaitHTTP(base+"/ready", http.StatusServiceUnavailable, time.Second))

	cancel()
	select {
	case code := <-done:
		assert.Equal(t, 0, code)
	case <-time.After(25 * time.Second):
		t.Fatal("did not stop after its context ended")
	}
}
