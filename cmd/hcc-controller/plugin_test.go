package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clerum/hcc/internal/testing/testenv"
)

func TestIsPluginByTheNameItRunsUnder(t *testing.T) {
	for argv0, want := range map[string]bool{
		"kubectl-hcc":                     true,
		"/home/me/.local/bin/kubectl-hcc": true, // kubectl starts a plugin by its path
		"kubectl-hcc.exe":                 true,
		"hcc-controller":                  false,
		"/hcc-controller":                 false,
		"kubectl-hcc-diff":                false,
		"/opt/kubectl-hcc/hcc-controller": false,
	} {
		assert.Equal(t, want, isPlugin(argv0), argv0)
	}
}

func runAsPlugin(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := runPlugin(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// The plugin runs render, census, diff, help and version; anything else,
// the controller's own flags included, is a usage error and never starts
// the controller.
func TestPluginRunsOnlyTheToolCommands(t *testing.T) {
	t.Setenv("KUBECONFIG", testenv.UnreachableKubeconfig(t))
	t.Setenv("INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET", "s3cret")

	code, out, _ := runAsPlugin()
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "kubectl hcc diff ")
	code, out, _ = runAsPlugin("--help")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "kubectl hcc render -f PATH")
	code, out, _ = runAsPlugin("version")
	assert.Equal(t, 0, code)
	assert.Equal(t, "kubectl-hcc dev (commit unknown)\n", out)

	for _, args := range [][]string{{"--kubeconfig", "x"}, {"-n", "mcp-server"}, {"run"}, {"controller"}} {
		code, out, stderr := runAsPlugin(args...)
		assert.Equal(t, 2, code, "%v", args)
		assert.Empty(t, out)
		assert.Contains(t, stderr, fmt.Sprintf("kubectl hcc: unknown command %q", args[0]))
	}

	// A subcommand's flags: -h lists the plugin's, --context among them.
	code, _, stderr := runAsPlugin("diff", "-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, stderr, "Usage of kubectl hcc diff:")
	assert.Contains(t, stderr, "-context")
	// The controller's subcommand keeps its own lookup and has no --context.
	var stdout, errs bytes.Buffer
	assert.Equal(t, diffError, run(context.Background(), []string{"diff", "--context", "x"}, &stdout, &errs))
	assert.Contains(t, errs.String(), "flag provided but not defined: -context")
}

// twoUnreachableContexts writes a kubeconfig whose contexts near and far
// name two servers that refuse connections, near the current-context, and
// returns it with the two server URLs.
func twoUnreachableContexts(t *testing.T) (path, near, far string) {
	near = fmt.Sprintf("https://127.0.0.1:%d", testenv.FreePort(t))
	far = fmt.Sprintf("https://127.0.0.1:%d", testenv.FreePort(t))
	require.NotEqual(t, near, far)
	path = filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- {name: near, cluster: {server: %q, insecure-skip-tls-verify: true}}
- {name: far, cluster: {server: %q, insecure-skip-tls-verify: true}}
users: [{name: u, user: {token: t}}]
contexts:
- {name: near, context: {cluster: near, user: u}}
- {name: far, context: {cluster: far, user: u}}
current-context: near
`, near, far)), 0o600))
	return path, near, far
}

// census and diff, run as the plugin, talk to the cluster of the
// current-context or of --context, and say which when it does not answer.
func TestPluginCommandsTalkToTheKubeconfigContext(t *testing.T) {
	kubeconfig, near, far := twoUnreachableContexts(t)
	t.Setenv("KUBECONFIG", kubeconfig)
	t.Setenv("INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET", "s3cret")

	for _, sub := range []string{"census", "diff"} {
		t.Run(sub, func(t *testing.T) {
			code, out, stderr := runAsPlugin(sub)
			assert.NotZero(t, code)
			assert.Empty(t, out)
			assert.True(t, strings.HasPrefix(stderr, "kubectl hcc "+sub+": "), stderr)
			assert.Contains(t, stderr, "cannot reach the Kubernetes API server at "+near)

			_, _, stderr = runAsPlugin(sub, "--context", "far")
			assert.Contains(t, stderr, "cannot reach the Kubernetes API server at "+far)

			_, _, stderr = runAsPlugin(sub, "--context", "elsewhere")
			assert.Contains(t, stderr, "cannot load the cluster configuration from KUBECONFIG (--context elsewhere)")
		})
	}
}
