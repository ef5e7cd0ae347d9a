package render

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/clerum/hcc/pkg/config"
)

const server = `apiVersion: clerum.io/v1alpha1
kind: McpServer
metadata:
  name: s1
spec:
  image: mongodb/mongodb-mcp-server:1.0
  transport: {type: sse}
  egressBindings:
  - {name: api, host: api.example.com, port: 443}
`

const context1 = `apiVersion: clerum.io/v1alpha1
kind: Context
metadata:
  name: context1
spec:
  contextId: c1
  mcpServers: [s1]
`

// noDNS fails every lookup, so tests never leave the machine.
type noDNS struct{}

func (noDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func testConfig(t *testing.T) *config.Config {
	cfg, err := config.LoadFrom(config.Render, func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	return cfg
}

// write creates files under a temporary folder and returns its path.
func write(t *testing.T, files map[string]string) string {
	dir := t.TempDir()
	for name, body := range files {
		path := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
	}
	return dir
}

type result struct {
	out      string
	warnings []string
	err      error
}

func run(t *testing.T, paths []string, overrides map[string][]netip.Addr) result {
	var r result
	out, err := Render(context.Background(), Options{
		Paths: paths, Overrides: overrides, Resolver: noDNS{}, Config: testConfig(t),
		Warn: func(format string, a ...any) { r.warnings = append(r.warnings, fmt.Sprintf(format, a...)) },
	})
	r.out, r.err = string(out), err
	return r
}

// policies decodes the rendered stream into "namespace/name" keys in order.
func policies(t *testing.T, out string) ([]string, map[string]*networkingv1.NetworkPolicy) {
	var order []string
	byKey := map[string]*networkingv1.NetworkPolicy{}
	for _, doc := range strings.Split(out, "---\n")[1:] {
		var p networkingv1.NetworkPolicy
		require.NoError(t, utilyaml.Unmarshal([]byte(doc), &p))
		if p.Kind != "NetworkPolicy" {
			continue
		}
		key := p.Namespace + "/" + p.Name
		order = append(order, key)
		byKey[key] = &p
	}
	return order, byKey
}

func TestRenderPlansFromFiles(t *testing.T) {
	dir := write(t, map[string]string{
		"servers/s1.yaml":   server,
		"contexts/c1.yml":   context1,
		"other/deploy.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
		"notes.txt":         "not yaml, not read",
	})
	r := run(t, []string{dir}, map[string][]netip.Addr{"api.example.com": {netip.MustParseAddr("93.184.216.34")}})
	require.NoError(t, r.err)

	order, byKey := policies(t, r.out)
	assert.IsIncreasing(t, order, "sorted by namespace and name within one kind")
	for _, want := range []string{
		"mcp-server/deny-all-mcp-server", "mcp-server/allow-host-context-controller-api",
		"mcp-server/ctx-c1-s1", "mcp-host/ctx-c1-s1-egress", "rpc-proxy/rpc-egress-c1-s1",
		"mcp-server/ext-egress-s1-api",
	} {
		assert.Contains(t, byKey, want)
	}
	ext := byKey["mcp-server/ext-egress-s1-api"]
	assert.Equal(t, "93.184.216.34/32", ext.Spec.Egress[0].To[0].IPBlock.CIDR)
	assert.NotContains(t, r.out, "creationTimestamp")
	assert.NotContains(t, r.out, "status:")
	// The McpServer operator's objects: the server's Deployment and
	// Service, owned by it (kind and name, no uid).
	assert.Contains(t, r.out, "kind: Deployment\nmetadata:\n  labels:\n    app: s1\n")
	assert.Contains(t, r.out, "kind: Service\nmetadata:\n  labels:\n    app: s1\n")
	assert.Contains(t, r.out, "    kind: McpServer\n    name: s1\n    uid: \"\"\n")
	assert.Equal(t, []string{"skipping apps/v1 Deployment (" + filepath.Join(dir, "other/deploy.yaml") +
		" document 1): render does not use this kind"}, r.warnings)
}

func TestRenderUnresolvableHostGetsNoAllow(t *testing.T) {
	dir := write(t, map[string]string{"all.yaml": server + "---\n" + context1})
	r := run(t, []string{dir}, nil)
	require.NoError(t, r.err)
	_, byKey := policies(t, r.out)
	assert.NotContains(t, byKey, "mcp-server/ext-egress-s1-api")
	assert.Contains(t, byKey, "mcp-server/ctx-c1-s1", "the rest of the plan is unaffected")
	require.Len(t, r.warnings, 2)
	assert.Contains(t, r.warnings[0], "McpServer s1 binding api not resolved")
	assert.Contains(t, r.warnings[0], "runtime stays blocked")
	assert.Equal(t, "McpServer s1 gets no Deployment (EgressPending): its egress bindings are not all allowed", r.warnings[1],
		"a server whose egress would block it gets no Deployment, as in the controller")
	assert.NotContains(t, r.out, "kind: Deployment")
}

func TestRenderIsDeterministic(t *testing.T) {
	dir := write(t, map[string]string{"b.yaml": context1, "a.yaml": server})
	overrides := map[string][]netip.Addr{"api.example.com": {netip.MustParseAddr("93.184.216.34")}}
	first := run(t, []string{dir}, overrides)
	require.NoError(t, first.err)
	swapped := write(t, map[string]string{"b.yaml": server, "a.yaml": context1})
	assert.Equal(t, first.out, run(t, []string{swapped}, overrides).out)
}

func TestRenderInputRules(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		paths   func(dir string) []string
		wantErr string
	}{
		{
			name:  "the same object given as a file and through its folder counts once",
			files: map[string]string{"s1.yaml": server},
			paths: func(dir string) []string { return []string{dir, filepath.Join(dir, "s1.yaml")} },
		},
		{
			name:    "two different objects with one name are bad input",
			files:   map[string]string{"a.yaml": server, "b.yaml": strings.Replace(server, "sse", "stdio", 1)},
			wantErr: "two different McpServer mcp-server/s1",
		},
		{
			name:    "an unknown field is bad input",
			files:   map[string]string{"a.yaml": strings.Replace(server, "image:", "imagee:", 1)},
			wantErr: `unknown field "imagee"`,
		},
		{
			name:    "an object the API server would refuse is bad input",
			files:   map[string]string{"a.yaml": strings.Replace(server, "{type: sse}", "{type: sse, port: 0}", 1)},
			wantErr: "invalid McpServer mcp-server/s1",
		},
		{
			name:    "a document without kind is bad input",
			files:   map[string]string{"a.yaml": "metadata: {name: x}\n"},
			wantErr: "apiVersion and kind are required",
		},
		{
			name:  "a v1 List is unpacked and empty documents skipped",
			files: map[string]string{"a.yaml": "---\n# nothing\n---\napiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(strings.TrimSpace(server), "\n", "\n  ") + "\n"},
		},
		{
			name:    "a missing path is bad input",
			files:   map[string]string{},
			paths:   func(dir string) []string { return []string{filepath.Join(dir, "absent.yaml")} },
			wantErr: "no such file",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := write(t, tc.files)
			paths := []string{dir}
			if tc.paths != nil {
				paths = tc.paths(dir)
			}
			r := run(t, paths, nil)
			if tc.wantErr == "" {
				require.NoError(t, r.err)
				assert.Contains(t, r.out, "deny-all-mcp-server")
				return
			}
			require.Error(t, r.err)
			assert.Contains(t, r.err.Error(), tc.wantErr)
			assert.NotContains(t, r.err.Error(), "\n", "one line")
		})
	}
}

func TestParseResolve(t *testing.T) {
	overrides := map[string][]netip.Addr{}
	require.NoError(t, ParseResolve("API.Example.com.=93.184.216.34,2606:2800:220:1::1", overrides))
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("2606:2800:220:1::1")},
		overrides["api.example.com"])
	for _, bad := range []string{"api.example.com", "=1.2.3.4", "api.example.com=", "api.example.com=not-an-ip"} {
		assert.Error(t, ParseResolve(bad, map[string][]netip.Addr{}), bad)
	}
}

func TestRenderPlansMcpServersAsTheControllerDecides(t *testing.T) {
	plain := func(extra string) string {
		return "apiVersion: clerum.io/v1alpha1\nkind: McpServer\nmetadata: {name: s2}\nspec:\n  image: mongodb/x:1\n  transport: {type: sse}\n" + extra
	}
	secret := "apiVersion: v1\nkind: Secret\nmetadata: {name: atlas}\nstringData: {uri: mongodb+srv://secret}\n"
	envSecret := "  envSecret: {name: atlas, keys: [{secretKey: uri, envName: URI}]}\n"
	// A remote server that also sets every container field, its envSecret's
	// Secret missing: the fields are ignored, as the controller ignores them.
	remote := plain("  remote: {url: \"https://mcp.atlassian.com/v1/sse\"}\n  command: [node]\n  args: [--readonly]\n" +
		"  env: [{name: LOG_LEVEL, value: info}]\n" + envSecret)
	tests := []struct {
		name       string
		files      string
		deployment bool
		replicas   string
		warning    string
		absent     string
	}{
		{name: "a remote server that sets container fields gets its proxy's Deployment", files: remote, deployment: true, replicas: "replicas: 1",
			warning: "McpServer s2: remote server: spec.image, spec.command, spec.args, spec.env, spec.envSecret are ignored", absent: "mongodb/x:1"},
		{name: "a server with its Secret gets a Deployment", files: plain(envSecret) + "---\n" + secret, deployment: true, replicas: "replicas: 1"},
		{name: "a missing Secret gets none", files: plain(envSecret), warning: "McpServer s2 gets no Deployment (SecretsMissing): Secret atlas does not exist"},
		{name: "a disabled server runs no replica", files: plain("  enabled: false\n"), deployment: true, replicas: "replicas: 0"},
		{name: "a stdio server without a command gets none", files: strings.Replace(plain(""), "type: sse", "type: stdio", 1),
			warning: "McpServer s2 gets no Deployment (InvalidSpec): " + "a stdio server needs spec.command"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, []string{write(t, map[string]string{"all.yaml": tc.files})}, nil)
			require.NoError(t, r.err)
			assert.Equal(t, tc.deployment, strings.Contains(r.out, "kind: Deployment"))
			assert.NotContains(t, r.out, "mongodb+srv://secret", "a Secret value is never printed")
			if tc.replicas != "" {
				assert.Contains(t, r.out, tc.replicas)
			}
			if tc.absent != "" {
				assert.NotContains(t, r.out, tc.absent)
			}
			if tc.warning != "" {
				require.NotEmpty(t, r.warnings)
				assert.Contains(t, r.warnings[len(r.warnings)-1], tc.warning)
			}
		})
	}
}

// hostConfig is the ConfigMap every mcp-host container loads.
const hostConfig = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: mcp-host-config, namespace: mcp-host}\ndata: {HTTPS_PROXY: \"\"}\n"

func TestRenderPlansHostsAsTheControllerDecides(t *testing.T) {
	hostDoc := func(name, ctx, extra string) string {
		return "apiVersion: clerum.io/v1alpha1\nkind: Host\nmetadata: {name: " + name + "}\nspec:\n  contextRef: " + ctx + "\n" + extra
	}
	ctxDoc := func(name, id, created string) string {
		return "apiVersion: clerum.io/v1alpha1\nkind: Context\nmetadata: {name: " + name + ", creationTimestamp: \"" + created + "\"}\nspec:\n  contextId: " + id + "\n  mcpServers: []\n"
	}
	objects := func(out string) []string {
		var keys []string
		for _, doc := range strings.Split(out, "---\n")[1:] {
			var o struct {
				Kind     string
				Metadata struct{ Namespace, Name string }
			}
			require.NoError(t, utilyaml.Unmarshal([]byte(doc), &o))
			if o.Kind != "NetworkPolicy" || strings.Contains(o.Metadata.Name, "desktop") || strings.HasPrefix(o.Metadata.Name, "channel-reader") {
				keys = append(keys, o.Kind+" "+o.Metadata.Namespace+"/"+o.Metadata.Name)
			}
		}
		return keys
	}
	t.Run("a Host whose Context holds its contextId gets every per-Host object", func(t *testing.T) {
		r := run(t, []string{write(t, map[string]string{"all.yaml": hostDoc("h1", "tenant", "  desktop: {enabled: true}\n") +
			"---\n" + ctxDoc("tenant", "tenant", "2026-01-01T00:00:00Z") + "---\n" + hostConfig})}, nil)
		require.NoError(t, r.err)
		got := objects(r.out)
		for _, want := range []string{
			"Deployment mcp-host/h1", "Service mcp-host/h1", "PersistentVolumeClaim mcp-host/h1-workspace",
			"Secret mcp-host/host-h1-mcp-host-runtime-tokens", "ServiceAccount mcp-host/host-h1", "Role mcp-host/host-h1",
			"RoleBinding mcp-host/host-h1", "NetworkPolicy mcp-host/allow-rpc-proxy-desktop-h1",
			"Deployment channels/channel-reader-h1", "Service channels/channel-reader-h1", "NetworkPolicy channels/channel-reader-h1-egress",
		} {
			assert.Contains(t, got, want)
		}
		assert.Contains(t, r.out, "clerum.io/context: tenant")
		assert.NotContains(t, r.out, "bootstrap-credential", "the runtime-token Secret is printed without data")
	})
	t.Run("a Host without the ConfigMap its container loads gets every object but its Deployment", func(t *testing.T) {
		r := run(t, []string{write(t, map[string]string{"all.yaml": hostDoc("h1", "tenant", "  desktop: {enabled: true}\n") +
			"---\n" + ctxDoc("tenant", "tenant", "2026-01-01T00:00:00Z") +
			// The same name in another namespace is not the Host's.
			"---\n" + strings.Replace(hostConfig, "namespace: mcp-host", "namespace: mcp-server", 1)})}, nil)
		require.NoError(t, r.err)
		got := objects(r.out)
		assert.NotContains(t, got, "Deployment mcp-host/h1")
		for _, want := range []string{
			"Service mcp-host/h1", "PersistentVolumeClaim mcp-host/h1-workspace", "Secret mcp-host/host-h1-mcp-host-runtime-tokens",
			"ServiceAccount mcp-host/host-h1", "NetworkPolicy mcp-host/allow-rpc-proxy-desktop-h1",
			"Deployment channels/channel-reader-h1", "NetworkPolicy channels/channel-reader-h1-egress",
		} {
			assert.Contains(t, got, want, "the reconciler writes the rest")
		}
		assert.Contains(t, r.warnings, "Host h1 gets no Deployment (ConfigMissing): ConfigMap mcp-host-config does not exist in mcp-host: "+
			"the mcp-host container loads it whole (its trust anchors and proxy); deploy/base/mcp-host ships it, pass it with -f")

		// The one deploy/base ships counts, given with -f.
		r = run(t, []string{write(t, map[string]string{"all.yaml": hostDoc("h1", "tenant", "") +
			"---\n" + ctxDoc("tenant", "tenant", "2026-01-01T00:00:00Z")}), filepath.Join("..", "..", "deploy", "base", "mcp-host")}, nil)
		require.NoError(t, r.err)
		assert.Contains(t, objects(r.out), "Deployment mcp-host/h1")
		for _, w := range r.warnings {
			assert.NotContains(t, w, "ConfigMissing")
		}

		// No ConfigMap configured: none is required, as in the controller.
		r = runEnv(t, map[string]string{"CONTEXT_MAPPER_HOST_CONFIGMAP_NAME": ""}, write(t, map[string]string{"all.yaml": hostDoc("h1", "tenant", "") +
			"---\n" + ctxDoc("tenant", "tenant", "2026-01-01T00:00:00Z")}))
		require.NoError(t, r.err)
		assert.Contains(t, objects(r.out), "Deployment mcp-host/h1")
	})
	t.Run("a missing Context gets nothing", func(t *testing.T) {
		r := run(t, []string{write(t, map[string]string{"all.yaml": hostDoc("h1", "nowhere", "")})}, nil)
		require.NoError(t, r.err)
		assert.Empty(t, objects(r.out))
		assert.Contains(t, r.warnings, "Host h1 gets no objects (ContextMissing): Context nowhere does not exist in mcp-server")
	})
	t.Run("a Context whose contextId an older one holds gets nothing", func(t *testing.T) {
		r := run(t, []string{write(t, map[string]string{"all.yaml": hostDoc("h1", "young", "") + "---\n" +
			ctxDoc("young", "shared", "2026-06-01T00:00:00Z") + "---\n" + ctxDoc("old", "shared", "2026-01-01T00:00:00Z")})}, nil)
		require.NoError(t, r.err)
		assert.Empty(t, objects(r.out))
		assert.Contains(t, r.warnings, "Host h1 gets no objects (ContextConflict): contextId shared of Context young is held by the older Context old")
	})
	t.Run("a secretRef naming a Secret no Host may read gets nothing", func(t *testing.T) {
		r := run(t, []string{write(t, map[string]string{"all.yaml": hostDoc("h1", "tenant", "  secretRef: {name: sa}\n") +
			"---\n" + ctxDoc("tenant", "tenant", "2026-01-01T00:00:00Z") + "---\n" + hostConfig +
			"---\napiVersion: v1\nkind: Secret\nmetadata: {name: sa, namespace: mcp-host, labels: {clerum.io/secret-for-host: h1}}\n" +
			"type: kubernetes.io/service-account-token\nstringData: {token: x}\n"})}, nil)
		require.NoError(t, r.err)
		assert.Empty(t, objects(r.out))
		assert.Contains(t, r.warnings, "Host h1 gets no objects (InvalidSpec): Secret sa may not be a Host's: it is a service-account token")
	})
	// HCC_HOST_SECRET_REQUIRE_LABEL decides an unlabelled Secret as it does
	// in the controller: admitted, and granted by the Role, by default;
	// refused when true.
	unlabelled := map[string]string{"all.yaml": hostDoc("h1", "tenant", "  secretRef: {name: creds}\n") +
		"---\n" + ctxDoc("tenant", "tenant", "2026-01-01T00:00:00Z") + "---\n" + hostConfig +
		"---\napiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: mcp-host}\nstringData: {token: x}\n"}
	t.Run("an unlabelled secretRef is admitted and granted by default", func(t *testing.T) {
		r := run(t, []string{write(t, unlabelled)}, nil)
		require.NoError(t, r.err)
		assert.Contains(t, objects(r.out), "Deployment mcp-host/h1")
		assert.Equal(t, []string{"host-h1-mcp-host-runtime-tokens", "creds"}, roleSecrets(t, r.out, "host-h1"))
	})
	t.Run("an unlabelled secretRef gets nothing under HCC_HOST_SECRET_REQUIRE_LABEL=true", func(t *testing.T) {
		r := runEnv(t, map[string]string{"HCC_HOST_SECRET_REQUIRE_LABEL": "true"}, write(t, unlabelled))
		require.NoError(t, r.err)
		assert.Empty(t, objects(r.out))
		assert.Contains(t, r.warnings, "Host h1 gets no objects (SecretsMissing): Secret creds is not labelled clerum.io/secret-for-host=h1, "+
			"which HCC_HOST_SECRET_REQUIRE_LABEL=true requires of a Host's Secret")
	})
	t.Run("a missing secretRef gets nothing", func(t *testing.T) {
		r := run(t, []string{write(t, map[string]string{"all.yaml": hostDoc("h1", "tenant", "  secretRef: {name: creds}\n") +
			"---\n" + ctxDoc("tenant", "tenant", "2026-01-01T00:00:00Z")})}, nil)
		require.NoError(t, r.err)
		assert.Empty(t, objects(r.out))
		assert.Contains(t, r.warnings, "Host h1 gets no objects (SecretsMissing): Secret creds does not exist")
	})
}

// The shipped examples plan every runtime: the Host's, the servers' and
// both file systems' (issue: deploy/examples), with no warning.
func TestRenderPlansTheShippedExamples(t *testing.T) {
	r := run(t, []string{filepath.Join("..", "..", "deploy", "examples")}, nil)
	require.NoError(t, r.err)
	for _, w := range r.warnings {
		assert.Regexp(t, `^skipping rbac\.authorization\.k8s\.io/v1 (ClusterRole|RoleBinding) \(\S*diff-rbac\.yaml document \d+\): render does not use this kind$`, w,
			"the examples carry everything their objects read; diff-rbac.yaml's RBAC is skipped")
	}
	assert.Equal(t, []string{
		"Deployment channels/channel-reader-research-1", "Deployment gfs/gfsc-main", "Deployment mcp-host/research-1",
		"Deployment mcp-host/wfc-team-docs", "Deployment mcp-server/fetch", "Deployment mcp-server/notes", "Deployment mcp-server/tracker",
		"Job gfs/gfsc-main-seed", "PersistentVolumeClaim mcp-host/research-1-workspace", "PersistentVolumeClaim mcp-host/wfc-team-docs-data",
	}, workloads(t, r.out))
	for _, want := range []string{
		"name: wfc-team-docs\n  namespace: mcp-host", "name: wfc-team-docs-ingress\n  namespace: mcp-host",
		"name: gfsc-main\n  namespace: gfs", "name: gfsc-main-egress\n  namespace: gfs",
	} {
		assert.Contains(t, r.out, want)
	}
	assert.NotContains(t, r.out, "gfs:example@", "a Secret value is never printed")
}

// workloads lists the Deployments, Jobs and claims of a rendered stream as
// "Kind namespace/name", sorted.
func workloads(t *testing.T, out string) []string {
	return objectsOf(t, out, "Deployment", "Job", "PersistentVolumeClaim")
}

// objectsOf lists the objects of the given kinds of a rendered stream as
// "Kind namespace/name", sorted.
// roleSecrets returns the Secret names the rendered Role mcp-host/name
// grants.
func roleSecrets(t *testing.T, out, name string) []string {
	t.Helper()
	for _, doc := range strings.Split(out, "---\n")[1:] {
		var role rbacv1.Role
		require.NoError(t, utilyaml.Unmarshal([]byte(doc), &role))
		if role.Kind != "Role" || role.Namespace != "mcp-host" || role.Name != name {
			continue
		}
		for _, r := range role.Rules {
			if slices.Equal(r.Resources, []string{"secrets"}) {
				return r.ResourceNames
			}
		}
	}
	t.Fatalf("no Role mcp-host/%s with a rule on secrets", name)
	return nil
}

func objectsOf(t *testing.T, out string, kinds ...string) []string {
	var keys []string
	for _, doc := range strings.Split(out, "---\n")[1:] {
		var o struct {
			Kind     string
			Metadata struct{ Namespace, Name string }
		}
		require.NoError(t, utilyaml.Unmarshal([]byte(doc), &o))
		if slices.Contains(kinds, o.Kind) {
			keys = append(keys, o.Kind+" "+o.Metadata.Namespace+"/"+o.Metadata.Name)
		}
	}
	sort.Strings(keys)
	return keys
}

// shippedFileSystems is deploy/examples/filesystems.yaml with edits.
func shippedFileSystems(t *testing.T, oldNew ...string) string {
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "examples", "filesystems.yaml"))
	require.NoError(t, err)
	s := string(raw)
	for i := 0; i+1 < len(oldNew); i += 2 {
		require.Contains(t, s, oldNew[i])
		s = strings.Replace(s, oldNew[i], oldNew[i+1], 1)
	}
	return s
}

// podOf decodes the pod template of the named Deployment or Job.
func podOf(t *testing.T, out, kind, name string) *corev1.PodSpec {
	for _, doc := range strings.Split(out, "---\n")[1:] {
		var o struct {
			Kind     string
			Metadata struct{ Name string }
			Spec     struct {
				Template corev1.PodTemplateSpec
			}
		}
		require.NoError(t, utilyaml.Unmarshal([]byte(doc), &o))
		if o.Kind == kind && o.Metadata.Name == name {
			return &o.Spec.Template.Spec
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

// The init container waits for the connection string's host and port, as
// the reconciler reads them from the raw Secret value; the value itself is
// never printed, and one that names no plain host leaves both empty.
func TestRenderGivesTheGFSCInitContainerThePostgresWaitTarget(t *testing.T) {
	waitEnv := func(pod *corev1.PodSpec) map[string]string {
		require.Len(t, pod.InitContainers, 1)
		env := map[string]string{}
		for _, e := range pod.InitContainers[0].Env {
			env[e.Name] = e.Value
		}
		return env
	}
	r := run(t, []string{write(t, map[string]string{"fs.yaml": shippedFileSystems(t, "cluster.local:5432/gfs", "cluster.local:6543/gfs")})}, nil)
	require.NoError(t, r.err)
	want := map[string]string{"GFSC_POSTGRES_HOST": "control-postgres.control-plane.svc.cluster.local", "GFSC_POSTGRES_PORT": "6543"}
	assert.Equal(t, want, waitEnv(podOf(t, r.out, "Deployment", "gfsc-main")))
	assert.Equal(t, want, waitEnv(podOf(t, r.out, "Job", "gfsc-main-seed")))
	assert.NotContains(t, r.out, "gfs:example@")

	r = run(t, []string{write(t, map[string]string{"fs.yaml": shippedFileSystems(t,
		"postgres://gfs:example@control-postgres.control-plane.svc.cluster.local:5432/gfs?sslmode=require",
		"host=a,b user=gfs password=example")})}, nil)
	require.NoError(t, r.err)
	assert.Equal(t, map[string]string{"GFSC_POSTGRES_HOST": "", "GFSC_POSTGRES_PORT": ""}, waitEnv(podOf(t, r.out, "Deployment", "gfsc-main")),
		"not a URL: not waited for, and still deployed")
	assert.NotContains(t, r.out, "password=example")
}

// Two GlobalFileSystems naming one drive plan one writer: the oldest by
// creation timestamp, then (render's input rarely has one) the smaller
// name; the other gets nothing, with a warning.
func TestRenderRunsOneGFSCPerDrive(t *testing.T) {
	gfs := func(name, meta, drive string) string {
		return "---\napiVersion: clerum.io/v1alpha1\nkind: GlobalFileSystem\nmetadata: {name: " + name + ", namespace: gfs" + meta + "}\nspec: {driveName: " + drive + "}\n"
	}
	r := run(t, []string{write(t, map[string]string{"fs.yaml": shippedFileSystems(t) + gfs("x", "", "main") + gfs("c", "", "other")})}, nil)
	require.NoError(t, r.err)
	got := objectsOf(t, r.out, "Deployment", "Job", "Service", "NetworkPolicy")
	assert.Contains(t, got, "Deployment gfs/gfsc-main", "no timestamps: the smaller name holds the drive")
	assert.Contains(t, got, "Deployment gfs/gfsc-c", "another drive is another writer")
	assert.NotContains(t, strings.Join(got, " "), "gfsc-x", "nothing for it, not even its Service or policy: the reconciler writes none")
	assert.Contains(t, r.warnings, "GlobalFileSystem x gets no runtime (DriveConflict): drive main is held by GlobalFileSystem main, "+
		"which is older; no gfsc runs for x while it names the drive")

	r = run(t, []string{write(t, map[string]string{"fs.yaml": shippedFileSystems(t, "name: main\n  namespace: gfs",
		"name: main\n  namespace: gfs\n  creationTimestamp: \"2026-06-01T00:00:00Z\"") +
		gfs("z", `, creationTimestamp: "2026-01-01T00:00:00Z"`, "main")})}, nil)
	require.NoError(t, r.err)
	got = workloads(t, r.out)
	assert.Contains(t, got, "Deployment gfs/gfsc-z", "the older holds the drive, whatever its name")
	assert.NotContains(t, got, "Deployment gfs/gfsc-main")
	assert.Contains(t, r.warnings, "GlobalFileSystem main gets no runtime (DriveConflict): drive main is held by GlobalFileSystem z, "+
		"which is older; no gfsc runs for main while it names the drive")
}

// A spec.size above HCC_SFS_MAX_SIZE is never asked of the cluster: no
// claim, and no WFC, which waits for its claim; its policies and Service
// are written, as by the reconciler.
func TestRenderGivesAnOversizedSharedFileSystemNoClaimAndNoWFC(t *testing.T) {
	dir := write(t, map[string]string{"fs.yaml": shippedFileSystems(t, "size: 5Gi", "size: 200Gi")})
	r := run(t, []string{dir}, nil)
	require.NoError(t, r.err)
	got := objectsOf(t, r.out, "Deployment", "PersistentVolumeClaim", "Service", "NetworkPolicy")
	assert.NotContains(t, got, "PersistentVolumeClaim mcp-host/wfc-team-docs-data")
	assert.NotContains(t, got, "Deployment mcp-host/wfc-team-docs")
	for _, want := range []string{"NetworkPolicy mcp-host/wfc-team-docs-ingress", "NetworkPolicy mcp-host/wfc-team-docs-egress", "Service mcp-host/wfc-team-docs"} {
		assert.Contains(t, got, want, "the reconciler writes the rest")
	}
	assert.Contains(t, r.warnings, "SharedFileSystem team-docs gets no claim and no Deployment (InvalidSpec): spec.size 200Gi is above HCC_SFS_MAX_SIZE (100Gi)")

	r = runEnv(t, map[string]string{"HCC_SFS_MAX_SIZE": "500Gi"}, dir)
	require.NoError(t, r.err)
	assert.Contains(t, workloads(t, r.out), "Deployment mcp-host/wfc-team-docs", "under a larger bound it runs")
}

func TestRenderGivesAFileSystemWithoutItsConfigNoRuntime(t *testing.T) {
	r := run(t, []string{write(t, map[string]string{"fs.yaml": "apiVersion: clerum.io/v1alpha1\nkind: SharedFileSystem\nmetadata: {name: docs}\nspec: {}\n" +
		"---\napiVersion: clerum.io/v1alpha1\nkind: GlobalFileSystem\nmetadata: {name: main, namespace: gfs}\nspec: {}\n"})}, nil)
	require.NoError(t, r.err)
	assert.NotContains(t, r.out, "wfc-docs")
	assert.NotContains(t, r.out, "gfsc-main")
	joined := strings.Join(r.warnings, "\n")
	assert.Contains(t, joined, "SharedFileSystem docs gets no runtime (ConfigMissing)")
	assert.Contains(t, joined, "GlobalFileSystem main gets no runtime (ConfigMissing)")
}

// runEnv is run with the configuration env gives.
func runEnv(t *testing.T, env map[string]string, paths ...string) result {
	cfg, err := config.LoadFrom(config.Render, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	var r result
	out, err := Render(context.Background(), Options{Paths: paths, Resolver: noDNS{}, Config: cfg,
		Warn: func(format string, a ...any) { r.warnings = append(r.warnings, fmt.Sprintf(format, a...)) }})
	r.out, r.err = string(out), err
	return r
}

// In enforce mode a refused image gets no Deployment and its Context
// allows are not planned; in audit mode it gets both.
func TestRenderEnforceModeStopsARefusedImage(t *testing.T) {
	refused := strings.Replace(server, "mongodb/mongodb-mcp-server:1.0", "evil.io/x:1", 1)
	dir := write(t, map[string]string{"s1.yaml": refused, "c1.yaml": context1})

	r := runEnv(t, map[string]string{"CONTEXT_MAPPER_ENFORCE_IMAGE_ALLOWLIST": "false"}, dir)
	require.NoError(t, r.err)
	_, byKey := policies(t, r.out)
	assert.Contains(t, byKey, "mcp-server/ctx-c1-s1", "audit mode plans its allows")

	r = runEnv(t, map[string]string{"CONTEXT_MAPPER_ENFORCE_IMAGE_ALLOWLIST": "true"}, dir)
	require.NoError(t, r.err)
	_, byKey = policies(t, r.out)
	for key := range byKey {
		assert.NotContains(t, key, "s1", "no allow of a refused server: %s", key)
	}
	assert.NotContains(t, r.out, "kind: Deployment")
	assert.Contains(t, r.warnings, "McpServer s1 gets no Deployment (ImageNotAllowed): image evil.io/x:1 is under no allowed prefix")
}

// A server named like a platform workload (from before the CRD refused
// such names) gets no workload; a Secret no server may read is missing.
func TestRenderRefusesReservedNamesAndForbiddenSecrets(t *testing.T) {
	reserved := strings.Replace(server, "name: s1", "name: host-context-controller", 1)
	r := run(t, []string{write(t, map[string]string{"s.yaml": reserved})}, nil)
	require.NoError(t, r.err)
	assert.NotContains(t, r.out, "kind: Deployment")
	assert.Contains(t, r.warnings, "McpServer host-context-controller gets no Deployment (InvalidSpec): "+
		"metadata.name is a platform app label value reserved for a platform workload; recreate the server under another name")

	for _, tc := range []struct{ secret, why string }{
		{"type: kubernetes.io/service-account-token\n", "it is a service-account token"},
		{"type: kubernetes.io/dockerconfigjson\n", "it is a registry credential (kubernetes.io/dockerconfigjson)"},
		{"type: kubernetes.io/dockercfg\n", "it is a registry credential (kubernetes.io/dockercfg)"},
		{"", "it is managed by HCC (label clerum.io/managed-by)"},
	} {
		withSecret := "apiVersion: clerum.io/v1alpha1\nkind: McpServer\nmetadata: {name: s2}\nspec:\n  image: mongodb/x:1\n  transport: {type: sse}\n" +
			"  envSecret: {name: sa, keys: [{secretKey: token, envName: TOKEN}]}\n---\n" +
			"apiVersion: v1\nkind: Secret\nmetadata: {name: sa, labels: {clerum.io/managed-by: host-context-controller}}\n" + tc.secret + "stringData: {token: x}\n"
		if tc.secret != "" {
			withSecret = strings.Replace(withSecret, ", labels: {clerum.io/managed-by: host-context-controller}", "", 1)
		}
		r = run(t, []string{write(t, map[string]string{"s.yaml": withSecret})}, nil)
		require.NoError(t, r.err)
		assert.NotContains(t, r.out, "kind: Deployment", tc.why)
		assert.Contains(t, r.warnings, "McpServer s2 gets no Deployment (SecretsMissing): Secret sa may not be read by an McpServer: "+tc.why)
	}
}
