package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

func TestARepeatedPublicKeyFailsStartup(t *testing.T) {
	key := testenv.RSAPublicKeyPEM(t)
	t.Setenv("CLERUM_DEV_MODE", "true")
	t.Setenv("HCC_MCP_HOST_JWT_PUBLIC_KEY", key+key)

	var stdout, stderr bytes.Buffer
	assert.Equal(t, 1, run(context.Background(), nil, &stdout, &stderr))
	out := stderr.String()
	assert.Equal(t, 1, strings.Count(out, "\n"), "one line: %q", out)
	assert.Contains(t, out, "HCC_MCP_HOST_JWT_PUBLIC_KEY: key 2 repeats key 1")
}

// The line keeps the prefix of the system HCC replaces, which log alerts
// match (docs/configuration.md).
func TestInvalidConfigurationLineStartsWithFatal(t *testing.T) {
	t.Setenv("HCC_MCP_HOST_JWT_PUBLIC_KEY", testenv.RSAPublicKeyPEM(t))
	t.Setenv("CONTEXT_MAPPER_PORT", "8o80")
	t.Setenv("KUBECONFIG", testenv.UnreachableKubeconfig(t))

	var stdout, stderr bytes.Buffer
	assert.Equal(t, 1, run(context.Background(), nil, &stdout, &stderr))
	out := stderr.String()
	assert.True(t, strings.HasPrefix(out, "[HCC] FATAL hcc-api: invalid configuration: "), "%q", out)
	assert.Contains(t, out, "CONTEXT_MAPPER_PORT")
	assert.Equal(t, 1, strings.Count(out, "\n"), "one line: %q", out)
	assert.Empty(t, stdout.String())
}

func TestUnreachableClusterExits(t *testing.T) {
	t.Setenv("HCC_MCP_HOST_JWT_PUBLIC_KEY", testenv.RSAPublicKeyPEM(t))
	t.Setenv("CONTEXT_MAPPER_PORT", strconv.Itoa(testenv.FreePort(t)))

	var stdout, stderr bytes.Buffer
	assert.Equal(t, 1, run(context.Background(), []string{"--kubeconfig", testenv.UnreachableKubeconfig(t)}, &stdout, &stderr))
}

func TestDevModeServesFixturesWithoutACluster(t *testing.T) {
	port := testenv.FreePort(t)
	t.Setenv("CLERUM_DEV_MODE", "true")
	// Two keys, as during a Control API key rotation.
	t.Setenv("HCC_MCP_HOST_JWT_PUBLIC_KEY", testenv.RSAPublicKeyPEM(t)+testenv.RSAPublicKeyPEM(t))
	t.Setenv("CONTEXT_MAPPER_PORT", strconv.Itoa(port))
	t.Setenv("KUBECONFIG", testenv.UnreachableKubeconfig(t))
	t.Setenv("CLERUM_MCP_SERVERS", `[{"name":"filesystem","spec":{"image":"mcp/filesystem:latest","transport":{"type":"sse","url":"http://localhost:3001/sse","port":3001},"enabled":true}}]`)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		var stdout, stderr bytes.Buffer
		done <- run(ctx, nil, &stdout, &stderr)
	}()

	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	assert.Equal(t, http.StatusOK, testenv.WaitHTTP(base+"/health", http.StatusOK, 10*time.Second))
	// Ready once the fixtures are loaded: no cluster is involved.
	assert.Equal(t, http.StatusOK, testenv.WaitHTTP(base+"/ready", http.StatusOK, time.Second))

	resp, err := http.Get(base + "/api/v1/mcpservers")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(body), `"url":"http://localhost:3001/sse"`)

	// v2 fails closed in dev mode. A token far over the 8 KiB cap still
	// reaches the handler and gets its 401: the server's header limit sits
	// above the token cap.
	for _, token := range []string{"x.y.z", strings.Repeat("a", 32<<10)} {
		req, err := http.NewRequest(http.MethodGet, base+"/api/v2/hosts/self/mcpservers", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err = http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		assert.Equal(t, `{"error":"unauthorized"}`, string(body))
	}

	cancel()
	select {
	case code := <-done:
		assert.Equal(t, 0, code)
	case <-time.After(25 * time.Second):
		t.Fatal("did not stop after its context ended")
	}
}

// hcc-api judges images with the controller's allowlist, so a list the
// controller would refuse stops it too, before it serves.
func TestABadImageAllowlistFailsStartup(t *testing.T) {
	t.Setenv("CLERUM_DEV_MODE", "true")
	t.Setenv("HCC_MCP_HOST_JWT_PUBLIC_KEY", testenv.RSAPublicKeyPEM(t))
	t.Setenv("CONTEXT_MAPPER_PORT", strconv.Itoa(testenv.FreePort(t)))
	t.Setenv("CONTEXT_MAPPER_ALLOWED_IMAGE_PREFIXES", "ghcr.io/Upper/")

	var stdout, stderr bytes.Buffer
	assert.Equal(t, 1, run(context.Background(), nil, &stdout, &stderr), "the error is logged, naming the variable")
}
