//go:build integration

package bench

import (
	"bytes"
	"context"
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
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/clerum/hcc/internal/testing/testenv"
	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
)

const (
	routeInventory  = "/api/v2/hosts/self/mcpservers"
	routeCredential = "/api/v2/hosts/self/mcpservers/credential"
)

// The counts BenchmarkAPIScale asserts.
const (
	// maxFailedRequests: under an offered load within the rate limit, every
	// request is a valid Host's and gets its 200; a failure of hcc-api or of
	// the bare handler (a transport error, a 429, a 5xx) fails the
	// benchmark, and failed requests are counted apart from the latencies.
	maxFailedRequests = 0
	// shippedRateLimit is HCC_MCP_HOST_API_RATE_LIMIT_PER_MINUTE as
	// deploy/base/api ships it: unset there, so pkg/config's default.
	shippedRateLimit = 120
)

// apiFleet is what the hcc-api benchmark serves.
type apiFleet struct {
	servers, contexts, hosts int
}

func (f apiFleet) perContext() int { return f.servers / f.contexts }

// BenchmarkAPIScale creates, as the admin, McpServers (10,000) each with
// the Secret its spec.auth.secretRef names, in Contexts (1,000) that list
// them evenly, and Hosts (5,000) spread over the Contexts; then runs the
// real hcc-api under its shipped service account and measures the time
// from its start to /ready, its peak RSS, and the latency of the Host
// inventory and of a credential read at an offered, open-loop load (1,000
// requests/s over every Host, 15 s, the first second discarded), beside a
// bare handler on the same machine serving a fixed body of hcc-api's own
// response to the same load generator. The bare handler is a process of
// its own (test/bench/internal/barehandler), built and started as hcc-api
// is. hcc-api runs with the shipped rate limit unless the fleet is so small
// that a Host's share of the load would exceed it; then the limit is raised
// and the output says so (a progress line and rate-limit/min).
func BenchmarkAPIScale(b *testing.B) {
	f := apiFleet{
		servers:  size(b, "HCC_BENCH_API_SERVERS", 10000),
		contexts: size(b, "HCC_BENCH_API_CONTEXTS", 1000),
		hosts:    size(b, "HCC_BENCH_API_HOSTS", 5000),
	}
	require.Positive(b, f.perContext(), "fewer servers than Contexts")
	rps := size(b, "HCC_BENCH_API_RPS", 1000)
	duration := time.Duration(size(b, "HCC_BENCH_API_SECONDS", 15)) * time.Second
	bin := buildBinary(b, "hcc-api")
	bareBin := buildPackage(b, "barehandler", "github.com/clerum/hcc/test/bench/internal/barehandler")
	ctx := context.Background()
	cp := startControlPlane(b, "", "api")
	admin := cp.Config()
	admin.QPS, admin.Burst = 5000, 10000
	kube := kubernetes.NewForConfigOrDie(admin)
	hcc := clientset.NewForConfigOrDie(admin)

	created := time.Now()
	parallel(b, 64, f.servers, func(i int) error {
		name := serverName(i)
		_, err := kube.CoreV1().Secrets("mcp-server").Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-auth"},
			StringData: map[string]string{"token": "token-of-" + name},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		s := newServer(i)
		s.Spec.Auth = &clerumv1alpha1.Auth{SecretRef: clerumv1alpha1.SecretKeyReference{Name: name + "-auth", Key: "token"}}
		_, err = hcc.ClerumV1alpha1().McpServers("mcp-server").Create(ctx, s, metav1.CreateOptions{})
		return err
	})
	parallel(b, 64, f.contexts, func(i int) error {
		_, err := hcc.ClerumV1alpha1().Contexts("mcp-server").Create(ctx, newContext(i, f.perContext()), metav1.CreateOptions{})
		return err
	})
	uids := make([]types.UID, f.hosts)
	parallel(b, 64, f.hosts, func(i int) error {
		h, err := hcc.ClerumV1alpha1().Hosts("mcp-host").Create(ctx, newHost(i, f.contexts), metav1.CreateOptions{})
		if err == nil {
			uids[i] = h.UID
		}
		return err
	})
	progressf("created %d Secrets, %d McpServers, %d Contexts and %d Hosts in %s", f.servers, f.servers, f.contexts, f.hosts, time.Since(created).Round(time.Second))

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(b, err)
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	require.NoError(b, err)
	port := testenv.FreePort(b)
	environ := append(shippedEnv(b, "api"),
		"CONTEXT_MAPPER_PORT="+strconv.Itoa(port),
		"HCC_MCP_HOST_JWT_PUBLIC_KEY="+string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})),
		"CONTEXT_MAPPER_DESKTOP_API_TOKEN=bench-desktop-token",
	)
	// The most one Host sends in a minute: both routes' runs, if one
	// clock-aligned window holds them all, and the two body probes.
	perHost := (2*rps*int(duration.Seconds())+f.hosts-1)/f.hosts + 2
	limit := shippedRateLimit
	if perHost > limit {
		limit = 2 * perHost
		progressf("hcc-api: HCC_MCP_HOST_API_RATE_LIMIT_PER_MINUTE=%d, not the shipped %d: %d Hosts share %d requests/s, up to %d a Host a minute",
			limit, shippedRateLimit, f.hosts, rps, perHost)
		environ = append(environ, "HCC_MCP_HOST_API_RATE_LIMIT_PER_MINUTE="+strconv.Itoa(limit))
	} else {
		progressf("hcc-api: the shipped rate limit, %d a Host a minute (up to %d sent)", shippedRateLimit, perHost)
	}
	api := startBinary(b, "hcc-api", bin, cp.ImpersonatingKubeconfig(apiUser, saGroups...), port, environ)
	readyAfter := api.waitHTTP(b, "/ready", 10*time.Minute).Sub(api.started)

	// The tokens the Control API would have issued, one per Host.
	tokens := make([]string, f.hosts)
	parallel(b, 4, f.hosts, func(i int) error {
		var err error
		tokens[i], err = hostToken(key, hostName(i), uids[i])
		return err
	})
	// request i is for Host i mod hosts and, for a credential, for one of
	// the servers its Context lists.
	credentialBody := func(i int) []byte {
		h := i % f.hosts
		c := h % f.contexts
		return fmt.Appendf(nil, `{"serverName":%q}`, serverName(c*f.perContext()+(i/f.hosts)%f.perContext()))
	}
	send := func(client *http.Client, base, route string, i int) (int, []byte, error) {
		method, body := http.MethodGet, []byte(nil)
		if route == routeCredential {
			method, body = http.MethodPost, credentialBody(i)
		}
		req, err := http.NewRequest(method, base+route, bytes.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tokens[i%f.hosts])
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		return resp.StatusCode, raw, err
	}

	// The bare handler answers with hcc-api's own bodies, so both send
	// the same bytes.
	bodies := map[string][]byte{}
	for _, route := range []string{routeInventory, routeCredential} {
		status, raw, err := send(http.DefaultClient, api.base, route, 0)
		require.NoError(b, err)
		require.Equal(b, http.StatusOK, status, "%s: %s", route, raw)
		bodies[route] = raw
	}
	var inv struct{ Servers []json.RawMessage }
	require.NoError(b, json.Unmarshal(bodies[routeInventory], &inv))
	require.Len(b, inv.Servers, f.perContext(), "a Host's inventory lists its Context's servers")
	bareArgs := []string{}
	for route, body := range bodies {
		file := filepath.Join(b.TempDir(), "body.json")
		require.NoError(b, os.WriteFile(file, body, 0o600))
		bareArgs = append(bareArgs, "--body", route+"="+file)
	}
	barePort := testenv.FreePort(b)
	bare := startProcess(b, "barehandler", bareBin, append([]string{"--port", strconv.Itoa(barePort)}, bareArgs...), barePort, nil)
	bare.waitHTTP(b, "/ready", time.Minute)

	for _, route := range []struct{ name, path string }{{"inventory", routeInventory}, {"credential", routeCredential}} {
		b.Run(route.name, func(b *testing.B) {
			for b.Loop() {
				load := func(base string) loadResult {
					client := loadClient()
					defer client.CloseIdleConnections()
					res := offerLoad(rps, duration, http.StatusOK, func(i int) (int, error) {
						status, _, err := send(client, base, route.path, i)
						return status, err
					})
					progressf("%s %s: p50 %s, p99 %s, %.0f req/s, statuses %v", base, route.path, res.p50, res.p99, res.achieved, res.statuses)
					return res
				}
				got, base := load(api.base), load(bare.base)
				ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
				b.ReportMetric(ms(got.p50), "p50-ms")
				b.ReportMetric(ms(got.p99), "p99-ms")
				b.ReportMetric(ms(got.p50)/ms(base.p50), "x-bare-p50")
				b.ReportMetric(ms(got.p99)/ms(base.p99), "x-bare-p99")
				b.ReportMetric(got.achieved, "req/s")
				b.ReportMetric(float64(rps), "offered-req/s")
				b.ReportMetric(float64(got.failures), "failed-req")
				b.ReportMetric(ms(base.p50), "bare-p50-ms")
				b.ReportMetric(ms(base.p99), "bare-p99-ms")
				b.ReportMetric(base.achieved, "bare-req/s")
				b.ReportMetric(float64(base.failures), "bare-failed-req")
				b.ReportMetric(float64(len(bodies[route.path])), "body-bytes")
				b.ReportMetric(float64(limit), "rate-limit/min")
				if got.failures > maxFailedRequests || base.failures > maxFailedRequests {
					b.Fatalf("failed requests: hcc-api %d (statuses %v), bare handler %d (statuses %v); at most %d each",
						got.failures, got.statuses, base.failures, base.statuses, maxFailedRequests)
				}
			}
		})
	}
	b.Run("process", func(b *testing.B) {
		for b.Loop() {
			errLines, warnLines, nErrors, nWarnings := api.logProblems(b, 5)
			for _, l := range append(errLines, warnLines...) {
				progressf("hcc-api: %s", l)
			}
			b.ReportMetric(readyAfter.Seconds(), "s-ready")
			b.ReportMetric(api.peakRSS(b), "MiB-rss")
			b.ReportMetric(float64(nErrors), "log-errors")
			b.ReportMetric(float64(nWarnings), "log-warnings")
			if nErrors > maxLogErrors {
				b.Fatalf("hcc-api logged %d errors, more than %d (the first above)", nErrors, maxLogErrors)
			}
		}
	})
}

// hostToken is what the Control API issues to a Host's mcp-host: a
// compact RS256 JWS with the claims of docs/http-api.md
// (internal/testing/apitest.HostToken, outside a *testing.T).
func hostToken(key *rsa.PrivateKey, host string, uid types.UID) (string, error) {
	now := time.Now()
	header, err := json.Marshal(map[string]any{"alg": "RS256", "typ": "JWT"})
	if err != nil {
		return "", err
	}
	claims, err := json.Marshal(map[string]any{
		"iss": "control-api",
		"aud": []string{"host-context-controller", "workflow-controller"},
		"iat": now.Unix(),
		// Within HCC_MCP_HOST_JWT_MAX_TTL_SECONDS as shipped (300): a
		// longer token is refused for its lifetime.
		"exp":          now.Add(5 * time.Minute).Unix(),
		"hostRefs":     []string{host},
		"host_uid":     string(uid),
		"capabilities": []string{"mcp:credential:read"},
	})
	if err != nil {
		return "", err
	}
	input := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(claims)
	digest := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	if err != nil {
		return "", err
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}
