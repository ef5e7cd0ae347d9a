package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/clerum/hcc/internal/testing/testenv"
)

func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 0, run(context.Background(), []string{"--version"}, &stdout, &stderr))
	assert.Equal(t, "hcc-controller dev (commit unknown)\n", stdout.String())
}

func TestInvalidConfigurationExitsWithOneLine(t *testing.T) {
	t.Setenv("INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET", "replace-with-a-real-secret")
	t.Setenv("CONTEXT_MAPPER_NODELOCAL_DNS_CIDR", "169.254.20.10/24")
	// An unreachable cluster proves the configuration fails first.
	t.Setenv("KUBECONFIG", testenv.UnreachableKubeconfig(t))

	var stdout, stderr bytes.Buffer
	assert.Equal(t, 1, run(context.Background(), nil, &stdout, &stderr))
	out := stderr.String()
	assert.Equal(t, 1, strings.Count(out, "\n"), "one line: %q", out)
	assert.Contains(t, out, "INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET")
	assert.Contains(t, out, "CONTEXT_MAPPER_NODELOCAL_DNS_CIDR")
	assert.NotContains(t, out, "replace-with-a-real-secret", "secrets never reach the output")
}

// The line keeps the prefix of the system HCC replaces, which log alerts
// match (docs/configuration.md).
func TestInvalidConfigurationLineStartsWithFatal(t *testing.T) {
	t.Setenv("INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET", "s3cret")
	t.Setenv("CONTEXT_MAPPER_NETPOL_ORPHAN_DELETE_CAP", "25m")
	t.Setenv("KUBECONFIG", testenv.UnreachableKubeconfig(t))

	var stdout, stderr bytes.Buffer
	assert.Equal(t, 1, run(context.Background(), nil, &stdout, &stderr))
	out := stderr.String()
	assert.True(t, strings.HasPrefix(out, "[HCC] FATAL hcc-controller: invalid configuration: "), "%q", out)
	assert.Contains(t, out, "CONTEXT_MAPPER_NETPOL_ORPHAN_DELETE_CAP")
	assert.Equal(t, 1, strings.Count(out, "\n"), "one line: %q", out)
	assert.Empty(t, stdout.String())
}

func TestUnreachableClusterExits(t *testing.T) {
	t.Setenv("INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET", "s3cret")
	t.Setenv("HCC_CONTROLLER_PORT", strconv.Itoa(testenv.FreePort(t)))

	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--kubeconfig", testenv.UnreachableKubeconfig(t)}, &stdout, &stderr)
	assert.Equal(t, 1, code)
}

func TestUnknownArgument(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 2, run(context.Background(), []string{"reconcile-everything"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), `unexpected argument "reconcile-everything"`)
}

func TestDevModeServesHealthWithoutACluster(t *testing.T) {
	port := testenv.FreePort(t)
	t.Setenv("CLERUM_DEV_MODE", "true")
	t.Setenv("HCC_CONTROLLER_PORT", strconv.Itoa(port))
	t.Setenv("KUBECONFIG", testenv.UnreachableKubeconfig(t))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		var stdout, stderr bytes.Buffer
		done <- run(ctx, nil, &stdout, &stderr)
	}()

	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	assert.Equal(t, http.StatusOK, testenv.WaitHTTP(base+"/health", http.StatusOK, 10*time.Second))
	assert.Equal(t, http.StatusOK, testenv.WaitHTTP(base+"/ready", http.StatusOK, time.Second))
	assert.Equal(t, http.StatusOK, testenv.WaitHTTP(base+"/metrics", http.StatusOK, time.Second))

	cancel()
	select {
	case code := <-done:
		assert.Equal(t, 0, code)
	case <-time.After(15 * time.Second):
		t.Fatal("did not stop after its context ended")
	}
}

func TestRenderSubcommand(t *testing.T) {
	dir := t.TempDir()
	server := `apiVersion: clerum.io/v1alpha1
kind: McpServer
metadata: {name: s1}
spec:
  image: mongodb/mongodb-mcp-server:1.0
  transport: {type: streamable-http}
  egressBindings: [{name: api, host: api.example.com, port: 443}]
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "s1.yaml"), []byte(server), 0o644))
	// render needs none of the live controller's secrets.
	t.Setenv("INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET", "")

	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"render", "-f", dir, "--resolve", "api.example.com=93.184.216.34"}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	assert.Contains(t, stdout.String(), "name: ext-egress-s1-api")
	assert.Contains(t, stdout.String(), "cidr: 93.184.216.34/32")

	stdout.Reset()
	stderr.Reset()
	code = run(context.Background(), []string{"render", "-f", filepath.Join(dir, "absent")}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Empty(t, stdout.String())
	assert.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: %q", stderr.String())

	stderr.Reset()
	assert.Equal(t, 1, run(context.Background(), []string{"render", "-f", dir, "--resolve", "nonsense"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "HOST=IP")
}

// render -f deploy/examples (docs/deploy.md) exits 0 without a warning and
// plans the example Host's Deployment, every example server's and both
// file systems' workloads.
func TestRenderTheShippedExamples(t *testing.T) {
	t.Setenv("INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET", "")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"render", "-f", filepath.Join("..", "..", "deploy", "examples")}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	// The only notes are the skips of diff-rbac.yaml, whose RBAC kinds
	// render does not use.
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if line != "" {
			assert.Regexp(t, `^warning: skipping rbac\.authorization\.k8s\.io/v1 (ClusterRole|RoleBinding) \(\S*diff-rbac\.yaml document \d+\): render does not use this kind$`, line,
				"no warning: the examples carry what their objects read")
		}
	}
	var got []string
	for _, doc := range strings.Split(stdout.String(), "---\n")[1:] {
		var o metav1.PartialObjectMetadata
		require.NoError(t, yaml.Unmarshal([]byte(doc), &o))
		if o.Kind == "Deployment" || o.Kind == "Job" {
			got = append(got, o.Kind+" "+o.Namespace+"/"+o.Name)
		}
	}
	assert.ElementsMatch(t, []string{
		"Deployment mcp-host/research-1", "Deployment channels/channel-reader-research-1",
		"Deployment mcp-server/fetch", "Deployment mcp-server/notes", "Deployment mcp-server/tracker",
		"Deployment mcp-host/wfc-team-docs", "Deployment gfs/gfsc-main", "Job gfs/gfsc-main-seed",
	}, got)
}
