//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/clerum/hcc/internal/testing/controlplane"
	"github.com/clerum/hcc/internal/testing/testenv"
	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/diff"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
)

// TestKubectlPlugin installs the plugin with make install-plugin and runs
// it as kubectl does, from a kubeconfig with two contexts: the cluster of
// the test and a decoy that refuses connections. The plugin reads the
// cluster of the current-context, or of --context; with no KUBECONFIG, of
// ~/.kube/config, before any in-cluster configuration; kubectl finds it on
// PATH as `kubectl hcc`; and its render prints what hcc-controller render
// prints.
func TestKubectlPlugin(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)

	// make install-plugin, into scratch directories.
	prefix := t.TempDir()
	install := exec.Command("make", "-C", root, "install-plugin", "BIN_DIR="+filepath.Join(prefix, "build"), "PREFIX="+prefix)
	install.Env = append(os.Environ(), "GOFLAGS=")
	out, err := install.CombinedOutput()
	require.NoError(t, err, "make install-plugin: %s", out)
	plugin := filepath.Join(prefix, "bin", pluginBinary)
	info, err := os.Lstat(plugin)
	require.NoError(t, err)
	assert.True(t, info.Mode().IsRegular(), "a copy, not a link into the build directory")
	// Built as make build builds: the version and commit stamped in.
	commit := "unknown"
	if head, err := exec.Command("git", "-C", root, "rev-parse", "--verify", "--quiet", "HEAD").Output(); err == nil {
		commit = strings.TrimSpace(string(head))
	}
	out, err = exec.Command(plugin, "version").Output()
	require.NoError(t, err)
	assert.Regexp(t, `^kubectl-hcc \S+ \(commit `+regexp.QuoteMeta(commit)+`\)\n$`, string(out))

	// Work a leader would do: a server to deploy; and the controller's
	// Deployment, whose caps the census reads.
	hcc := clientset.NewForConfigOrDie(c.cp.Config())
	_, err = hcc.ClerumV1alpha1().McpServers("mcp-server").Create(ctx, &clerumv1alpha1.McpServer{
		ObjectMeta: metav1.ObjectMeta{Name: "plugged"},
		Spec: clerumv1alpha1.McpServerSpec{Image: "mongodb/plugged:1",
			Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportSSE}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "base", "controller", "deployment.yaml"))
	require.NoError(t, err)
	var dep appsv1.Deployment
	require.NoError(t, yaml.UnmarshalStrict(raw, &dep))
	_, err = c.kube.AppsV1().Deployments("control-plane").Create(ctx, &dep, metav1.CreateOptions{})
	require.NoError(t, err)

	// The test's cluster as context "hcc-test", the current one, beside
	// the decoy.
	decoy := fmt.Sprintf("https://127.0.0.1:%d", testenv.FreePort(t))
	kubeconfig := writeTwoContexts(t, c.cp.Kubeconfig(), decoy, filepath.Join(prefix, "kubeconfig"))
	env := append(controlplane.BinaryEnv(), "INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET=integration-secret", "KUBECONFIG="+kubeconfig)
	runPluginBinary := func(env []string, args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(plugin, args...)
		cmd.Env = env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			require.NoError(t, err)
		}
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}

	t.Run("diff reads the cluster of the current-context", func(t *testing.T) {
		code, stdout, stderr := runPluginBinary(env, "diff", "--settle", "1s", "-o", "json")
		require.Equal(t, diffChanges, code, "stderr: %s", stderr)
		var report diff.Report
		require.NoError(t, json.Unmarshal([]byte(stdout), &report), stdout)
		assert.Contains(t, report.Writes, diff.Write{Controller: "mcpserver", Verb: "create", Action: "create",
			Group: "apps", Resource: "deployments", Kind: "Deployment", Namespace: "mcp-server", Name: "plugged"})
	})

	t.Run("--context chooses another", func(t *testing.T) {
		code, stdout, stderr := runPluginBinary(env, "diff", "--context", "decoy")
		assert.Equal(t, diffError, code)
		assert.Empty(t, stdout)
		assert.Contains(t, stderr, "kubectl hcc diff: cannot reach the Kubernetes API server at "+decoy)
	})

	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed: the plugin ran directly above; kubectl's discovery of it is not checked")
	}
	// kubectl as a user runs it: the plugin on PATH, no KUBECONFIG, the
	// kubeconfig in ~/.kube/config.
	home := filepath.Join(prefix, "home")
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".kube"), 0o700))
	require.NoError(t, os.Rename(kubeconfig, filepath.Join(home, ".kube", "config")))
	var userEnv []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "KUBECONFIG=") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "PATH=") {
			userEnv = append(userEnv, kv)
		}
	}
	userEnv = append(userEnv, "HOME="+home, "PATH="+filepath.Dir(plugin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	runKubectl := func(env []string, args ...string) (string, string) {
		t.Helper()
		cmd := exec.Command(kubectl, args...)
		cmd.Env = env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "kubectl %v: %s", args, stderr.String())
		return stdout.String(), stderr.String()
	}

	t.Run("kubectl hcc census", func(t *testing.T) {
		// The pod variables that would send the controller's lookup
		// in-cluster change nothing: kubectl's prefers the kubeconfig.
		inPod := append(slices.Clone(userEnv), "KUBERNETES_SERVICE_HOST=127.0.0.1", "KUBERNETES_SERVICE_PORT=1")
		stdout, _ := runKubectl(inPod, "hcc", "census")
		// Outside the cluster, the caps are the deployed controller's.
		assert.Contains(t, stdout, "caps and namespaces from Deployment control-plane/hcc-controller, container hcc-controller:")
		assert.Contains(t, stdout, "cap would trip: no")
	})

	t.Run("kubectl hcc render prints what hcc-controller render prints", func(t *testing.T) {
		examples := filepath.Join(root, "deploy", "examples")
		stdout, stderr := runKubectl(userEnv, "hcc", "render", "-f", examples)
		var want, wantErr bytes.Buffer
		t.Setenv("INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET", "")
		require.Equal(t, 0, run(ctx, []string{"render", "-f", examples}, &want, &wantErr), wantErr.String())
		assert.Equal(t, want.String(), stdout)
		assert.Equal(t, wantErr.String(), stderr)
	})
}

// writeTwoContexts writes to path the kubeconfig at from with its one
// context renamed hcc-test and a context decoy for server added.
func writeTwoContexts(t *testing.T, from, server, path string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(from)
	require.NoError(t, err)
	require.Len(t, cfg.Contexts, 1)
	for name, c := range cfg.Contexts {
		delete(cfg.Contexts, name)
		cfg.Contexts["hcc-test"] = c
	}
	cfg.CurrentContext = "hcc-test"
	cfg.Clusters["decoy"] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["decoy"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["decoy"] = &clientcmdapi.Context{Cluster: "decoy", AuthInfo: "decoy"}
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}
