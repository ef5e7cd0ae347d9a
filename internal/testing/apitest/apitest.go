// Package apitest runs the hcc-api binary for integration tests and signs
// the RS256 tokens the Control API would issue to a Host's mcp-host
// (docs/http-api.md).
package apitest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/clerum/hcc/internal/testing/testenv"
)

// Build builds cmd/hcc-api with the race detector into a temporary folder.
func Build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hcc-api")
	cmd := exec.Command("go", "build", "-race", "-o", bin, "github.com/clerum/hcc/cmd/hcc-api")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "building hcc-api: %s", out)
	return bin
}

// Replica is one running hcc-api process.
type Replica struct {
	// Base is http://127.0.0.1:PORT.
	Base string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
}

// Start runs bin against kubeconfig, verifying tokens with the PEM keys in
// publicKeys, and kills it when the test ends if the test did not stop it.
func Start(t *testing.T, bin, kubeconfig, publicKeys string, env ...string) *Replica {
	t.Helper()
	port := testenv.FreePort(t)
	log, err := os.Create(filepath.Join(t.TempDir(), "hcc-api.log"))
	require.NoError(t, err)
	cmd := exec.Command(bin, "--kubeconfig", kubeconfig)
	cmd.Env = append(os.Environ(),
		"HCC_MCP_HOST_JWT_PUBLIC_KEY="+publicKeys,
		"CONTEXT_MAPPER_PORT="+strconv.Itoa(port),
		"CLERUM_DEV_MODE=false",
		"LOG_LEVEL=info",
	)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	r := &Replica{cmd: cmd, Base: fmt.Sprintf("http://127.0.0.1:%d", port), log: log, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = cmd.Process.Kill()
			<-r.done
		}
		if t.Failed() {
			t.Logf("hcc-api %s log:\n%s", r.Base, r.LogTail())
		}
	})
	return r
}

// WaitReady waits until /ready answers 200.
func (r *Replica) WaitReady(t *testing.T) {
	t.Helper()
	require.Equal(t, http.StatusOK, testenv.WaitHTTP(r.Base+"/ready", http.StatusOK, time.Minute),
		"replica %s never became ready:\n%s", r.Base, r.LogTail())
}

// Stop sends SIGTERM and returns the exit code once the replica drained.
func (r *Replica) Stop(t *testing.T) int {
	t.Helper()
	require.NoError(t, r.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-r.done:
		return r.cmd.ProcessState.ExitCode()
	case <-time.After(30 * time.Second):
		t.Fatalf("hcc-api %s did not stop after SIGTERM", r.Base)
		return -1
	}
}

// LogTail is the last 40 lines the replica logged.
func (r *Replica) LogTail() string {
	raw, _ := os.ReadFile(r.log.Name())
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	return strings.Join(lines[max(0, len(lines)-40):], "\n")
}

// Do sends one request, with a bearer token unless token is empty, and
// returns the status code and body.
func (r *Replica) Do(t *testing.T, method, path, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, r.Base+path, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(raw)
}

// Inventory is the body of GET /api/v2/hosts/self/mcpservers.
type Inventory struct {
	Servers []map[string]any `json:"servers"`
}

// DecodeInventory parses an inventory body, servers sorted by name.
func DecodeInventory(t *testing.T, body string) Inventory {
	t.Helper()
	var inv Inventory
	require.NoError(t, json.Unmarshal([]byte(body), &inv), body)
	slices.SortFunc(inv.Servers, func(x, y map[string]any) int { return strings.Compare(x["name"].(string), y["name"].(string)) })
	return inv
}

// PublicKeyPEM encodes key's public half as PKIX PEM.
func PublicKeyPEM(t *testing.T, key *rsa.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// HostToken is what the Control API issues to a Host's mcp-host: a compact
// RS256 JWS with the claims of docs/http-api.md.
func HostToken(t *testing.T, key *rsa.PrivateKey, host string, uid types.UID) string {
	t.Helper()
	now := time.Now()
	enc := func(v any) string {
		raw, err := json.Marshal(v)
		require.NoError(t, err)
		return base64.RawURLEncoding.EncodeToString(raw)
	}
	input := enc(map[string]any{"alg": "RS256", "typ": "JWT"}) + "." + enc(map[string]any{
		"iss":          "control-api",
		"aud":          []string{"host-context-controller", "workflow-controller"},
		"iat":          now.Unix(),
		"exp":          now.Add(5 * time.Minute).Unix(),
		"hostRefs":     []string{host},
		"host_uid":     string(uid),
		"capabilities": []string{"mcp:credential:read"},
	})
	digest := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	require.NoError(t, err)
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}
