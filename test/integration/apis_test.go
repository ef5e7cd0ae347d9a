//go:build integration

// Package integration holds tests that run against a real etcd and
// kube-apiserver with HCC's CRDs installed (make test-integration).
package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	applymetav1 "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/clerum/hcc/internal/testing/controlplane"
	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	applyv1alpha1 "github.com/clerum/hcc/pkg/generated/applyconfiguration/clerum/v1alpha1"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	informers "github.com/clerum/hcc/pkg/generated/informers/externalversions"
	"github.com/clerum/hcc/pkg/validation"
)

const (
	serverNS = "mcp-server"
	hostNS   = "mcp-host"
	gfsNS    = "gfs"
)

// env is one control plane shared by the tests of this file; each test uses
// its own object names.
type env struct {
	cp      *controlplane.ControlPlane
	kube    kubernetes.Interface
	hcc     clientset.Interface
	dynamic dynamic.Interface
}

func startEnv(t *testing.T) *env {
	t.Helper()
	cp := controlplane.Start(t, controlplane.Options{})
	cfg := cp.Config()
	e := &env{
		cp:      cp,
		kube:    kubernetes.NewForConfigOrDie(cfg),
		hcc:     clientset.NewForConfigOrDie(cfg),
		dynamic: dynamic.NewForConfigOrDie(cfg),
	}
	for _, ns := range []string{serverNS, hostNS, gfsNS} {
		_, err := e.kube.CoreV1().Namespaces().Create(context.Background(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	return e
}

func TestAPITypes(t *testing.T) {
	e := startEnv(t)
	t.Run("each kind round-trips through clientset, informer, lister and status", e.testRoundTrip)
	t.Run("the API server applies the defaults HCC assumes", e.testDefaults)
	t.Run("McpServer status has two server-side apply owners", e.testStatusOwners)
	t.Run("the API server rejects invalid specs", e.testRejections)
	t.Run("kubectl get hcc resolves to every kind, and each short name to its own", e.testCategoryAndShortNames)
	t.Run("kubectl get shows each kind's readiness and reason", e.testPrinterColumns)
}

func (e *env) testRoundTrip(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	factory := informers.NewSharedInformerFactory(e.hcc, 0)
	v1 := factory.Clerum().V1alpha1()
	servers, contexts, hosts := v1.McpServers(), v1.Contexts(), v1.Hosts()
	sfs, gfs := v1.SharedFileSystems(), v1.GlobalFileSystems()
	// The factory starts only the informers requested before Start.
	servers.Informer()
	contexts.Informer()
	hosts.Informer()
	sfs.Informer()
	gfs.Informer()
	stop := make(chan struct{})
	factory.Start(stop)
	defer func() {
		close(stop)
		factory.Shutdown() // waits for the informers to stop
	}()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		require.True(t, ok, "cache of %v synced", typ)
	}

	condition := metav1.Condition{Type: clerumv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Tested", Message: "round trip"}
	setReady := func(conds *[]metav1.Condition, generation int64) {
		c := condition
		c.ObservedGeneration = generation
		meta.SetStatusCondition(conds, c)
	}

	t.Run("McpServer", func(t *testing.T) {
		c := e.hcc.ClerumV1alpha1().McpServers(serverNS)
		assert.Empty(t, validation.McpServer(newServer("rt-server")))
		created, err := c.Create(ctx, newServer("rt-server"), metav1.CreateOptions{})
		require.NoError(t, err)
		got := waitListed(t, ctx, func() (*clerumv1alpha1.McpServer, error) {
			return servers.Lister().McpServers(serverNS).Get("rt-server")
		})
		assert.Equal(t, created.UID, got.UID)

		upd := got.DeepCopy()
		upd.Status.Deployed, upd.Status.Ready, upd.Status.ObservedGeneration = true, true, upd.Generation
		setReady(&upd.Status.Conditions, upd.Generation)
		after, err := c.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		require.NoError(t, err)
		assert.Equal(t, created.Generation, after.Generation, "a status write does not bump the generation")
		waitFor(t, ctx, func() bool {
			s, err := servers.Lister().McpServers(serverNS).Get("rt-server")
			return err == nil && s.Status.Ready && meta.IsStatusConditionTrue(s.Status.Conditions, clerumv1alpha1.ConditionReady)
		})

		// The status subresource ignores spec, and the main resource ignores status.
		upd = after.DeepCopy()
		upd.Spec.Description = "changed"
		upd.Status.Ready = false
		after, err = c.Update(ctx, upd, metav1.UpdateOptions{})
		require.NoError(t, err)
		assert.True(t, after.Status.Ready, "an update of the main resource keeps status")
		assert.Equal(t, created.Generation+1, after.Generation, "a spec change bumps the generation")
	})

	t.Run("Context", func(t *testing.T) {
		c := e.hcc.ClerumV1alpha1().Contexts(serverNS)
		_, err := c.Create(ctx, newContext("rt-context", "rt-ctx", "rt-server"), metav1.CreateOptions{})
		require.NoError(t, err)
		got := waitListed(t, ctx, func() (*clerumv1alpha1.Context, error) { return contexts.Lister().Contexts(serverNS).Get("rt-context") })
		upd := got.DeepCopy()
		upd.Status.ObservedGeneration = upd.Generation
		setReady(&upd.Status.Conditions, upd.Generation)
		_, err = c.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		require.NoError(t, err)
		waitFor(t, ctx, func() bool {
			o, err := contexts.Lister().Contexts(serverNS).Get("rt-context")
			return err == nil && o.Status.ObservedGeneration == o.Generation && len(o.Status.Conditions) == 1
		})
	})

	t.Run("Host", func(t *testing.T) {
		c := e.hcc.ClerumV1alpha1().Hosts(hostNS)
		_, err := c.Create(ctx, newHost("rt-host", "rt-context"), metav1.CreateOptions{})
		require.NoError(t, err)
		got := waitListed(t, ctx, func() (*clerumv1alpha1.Host, error) { return hosts.Lister().Hosts(hostNS).Get("rt-host") })
		assert.True(t, got.Spec.DesktopEnabled())
		upd := got.DeepCopy()
		upd.Status.ObservedGeneration = upd.Generation
		setReady(&upd.Status.Conditions, upd.Generation)
		_, err = c.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		require.NoError(t, err)
		waitFor(t, ctx, func() bool {
			o, err := hosts.Lister().Hosts(hostNS).Get("rt-host")
			return err == nil && meta.IsStatusConditionTrue(o.Status.Conditions, clerumv1alpha1.ConditionReady)
		})
	})

	t.Run("SharedFileSystem", func(t *testing.T) {
		c := e.hcc.ClerumV1alpha1().SharedFileSystems(hostNS)
		obj := &clerumv1alpha1.SharedFileSystem{
			ObjectMeta: metav1.ObjectMeta{Name: "rt-sfs"},
			Spec:       clerumv1alpha1.SharedFileSystemSpec{HostRefs: []string{"rt-host"}, Directories: []string{"inbox", "shared/out"}},
		}
		_, err := c.Create(ctx, obj, metav1.CreateOptions{})
		require.NoError(t, err)
		got := waitListed(t, ctx, func() (*clerumv1alpha1.SharedFileSystem, error) {
			return sfs.Lister().SharedFileSystems(hostNS).Get("rt-sfs")
		})
		upd := got.DeepCopy()
		upd.Status.Phase = clerumv1alpha1.FileSystemInitializing
		upd.Status.ObservedGeneration = upd.Generation
		_, err = c.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		require.NoError(t, err)
		waitFor(t, ctx, func() bool {
			o, err := sfs.Lister().SharedFileSystems(hostNS).Get("rt-sfs")
			return err == nil && o.Status.Phase == clerumv1alpha1.FileSystemInitializing
		})
	})

	t.Run("GlobalFileSystem", func(t *testing.T) {
		c := e.hcc.ClerumV1alpha1().GlobalFileSystems(gfsNS)
		obj := &clerumv1alpha1.GlobalFileSystem{ObjectMeta: metav1.ObjectMeta{Name: "rt-gfs"}, Spec: clerumv1alpha1.GlobalFileSystemSpec{DriveName: "main"}}
		_, err := c.Create(ctx, obj, metav1.CreateOptions{})
		require.NoError(t, err)
		got := waitListed(t, ctx, func() (*clerumv1alpha1.GlobalFileSystem, error) {
			return gfs.Lister().GlobalFileSystems(gfsNS).Get("rt-gfs")
		})
		upd := got.DeepCopy()
		upd.Status.Phase, upd.Status.RootSeeded = clerumv1alpha1.FileSystemReady, true
		_, err = c.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		require.NoError(t, err)
		waitFor(t, ctx, func() bool {
			o, err := gfs.Lister().GlobalFileSystems(gfsNS).Get("rt-gfs")
			return err == nil && o.Status.RootSeeded
		})
	})
}

func (e *env) testDefaults(t *testing.T) {
	ctx := context.Background()
	obj := newServer("defaults")
	obj.Spec.EgressBindings = []clerumv1alpha1.EgressBinding{{Name: "api", Host: "api.example.com", Port: ptr.To[int32](443)}}
	created, err := e.hcc.ClerumV1alpha1().McpServers(serverNS).Create(ctx, obj, metav1.CreateOptions{})
	require.NoError(t, err)

	// What the server stored equals what HCC's accessors assume for the
	// same unset fields.
	require.NotNil(t, created.Spec.Enabled)
	assert.Equal(t, obj.Spec.IsEnabled(), *created.Spec.Enabled)
	require.NotNil(t, created.Spec.Transport.Port)
	assert.Equal(t, obj.Spec.Transport.EffectivePort(), *created.Spec.Transport.Port)
	b := created.Spec.EgressBindings[0]
	assert.Equal(t, obj.Spec.EgressBindings[0].EffectiveMode(), b.Mode)
	assert.Equal(t, obj.Spec.EgressBindings[0].EffectiveProtocol(), string(b.Protocol))
}

func (e *env) testStatusOwners(t *testing.T) {
	ctx := context.Background()
	c := e.hcc.ClerumV1alpha1().McpServers(serverNS)
	_, err := c.Create(ctx, newServer("owners"), metav1.CreateOptions{})
	require.NoError(t, err)

	applyNetpol := func(ips ...string) {
		t.Helper()
		cfg := applyv1alpha1.McpServer("owners", serverNS).WithStatus(applyv1alpha1.McpServerStatus().
			WithResolvedEgressIPs(ips...).
			WithConditions(condition(clerumv1alpha1.ConditionExternalEgressReady, metav1.ConditionTrue, "Resolved")))
		_, err := c.ApplyStatus(ctx, cfg, metav1.ApplyOptions{FieldManager: clerumv1alpha1.FieldManagerNetPol, Force: true})
		require.NoError(t, err)
	}
	applyServer := func(ready bool) {
		t.Helper()
		status := metav1.ConditionFalse
		if ready {
			status = metav1.ConditionTrue
		}
		cfg := applyv1alpha1.McpServer("owners", serverNS).WithStatus(applyv1alpha1.McpServerStatus().
			WithDeployed(true).WithReady(ready).WithObservedGeneration(1).
			WithConditions(condition(clerumv1alpha1.ConditionReady, status, "Tested")))
		_, err := c.ApplyStatus(ctx, cfg, metav1.ApplyOptions{FieldManager: clerumv1alpha1.FieldManagerMcpServer, Force: true})
		require.NoError(t, err)
	}

	applyNetpol("203.0.113.10")
	applyServer(false)
	applyNetpol("203.0.113.11")
	applyServer(true)

	got, err := c.Get(ctx, "owners", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"203.0.113.11"}, got.Status.ResolvedEgressIPs)
	assert.True(t, got.Status.Ready)
	assert.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, clerumv1alpha1.ConditionExternalEgressReady),
		"hcc-mcpserver's apply leaves hcc-netpol's condition alone")
	assert.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, clerumv1alpha1.ConditionReady))

	managers := map[string]bool{}
	for _, mf := range got.ManagedFields {
		if mf.Subresource == "status" {
			managers[mf.Manager] = true
		}
	}
	assert.Equal(t, map[string]bool{clerumv1alpha1.FieldManagerNetPol: true, clerumv1alpha1.FieldManagerMcpServer: true}, managers)
}

// condition is a status condition as server-side apply sends it; the API
// server fills in lastTransitionTime.
func condition(typ string, status metav1.ConditionStatus, reason string) *applymetav1.ConditionApplyConfiguration {
	return applymetav1.Condition().WithType(typ).WithStatus(status).WithReason(reason).
		WithMessage("set by the test").WithLastTransitionTime(metav1.Now())
}

func (e *env) testRejections(t *testing.T) {
	tests := []struct {
		name    string
		gvr     string
		ns      string
		obj     string
		message string
	}{
		{"a directory climbing out of the volume", "sharedfilesystems", hostNS,
			`{"metadata":{"name":"climb"},"spec":{"directories":["ok/../../etc"]}}`, "spec.directories"},
		{"a directory that is the volume root", "sharedfilesystems", hostNS,
			`{"metadata":{"name":"dot"},"spec":{"directories":["."]}}`, "spec.directories"},
		{"a Host named like a SharedFileSystem's workload", "hosts", hostNS,
			`{"metadata":{"name":"wfc-team"},"spec":{"contextRef":"c"}}`, "may not start with wfc-"},
		{"transport port 0", "mcpservers", serverNS,
			`{"metadata":{"name":"bad-port"},"spec":{"image":"i","transport":{"type":"sse","port":0}}}`, "spec.transport.port"},
		{"transport port 65536", "mcpservers", serverNS,
			`{"metadata":{"name":"bad-port-high"},"spec":{"image":"i","transport":{"type":"sse","port":65536}}}`, "spec.transport.port"},
		{"an unknown transport type", "mcpservers", serverNS,
			`{"metadata":{"name":"bad-type"},"spec":{"image":"i","transport":{"type":"websocket"}}}`, "spec.transport.type"},
		{"no transport", "mcpservers", serverNS,
			`{"metadata":{"name":"no-transport"},"spec":{"image":"i"}}`, "spec.transport"},
		{"no image and no remote", "mcpservers", serverNS,
			`{"metadata":{"name":"no-image"},"spec":{"transport":{"type":"sse"}}}`, "image is required unless remote is set"},
		{"a binding with both host and cidr", "mcpservers", serverNS,
			`{"metadata":{"name":"both"},"spec":{"image":"i","transport":{"type":"sse"},"egressBindings":[{"name":"b","host":"api.example.com","cidr":"203.0.113.0/24","port":443}]}}`,
			"host and cidr are mutually exclusive"},
		{"an exact-host binding without a port", "mcpservers", serverNS,
			`{"metadata":{"name":"noport"},"spec":{"image":"i","transport":{"type":"sse"},"egressBindings":[{"name":"b","host":"api.example.com"}]}}`,
			"needs one of host or cidr, and a port"},
		{"an exact-host binding without host or cidr", "mcpservers", serverNS,
			`{"metadata":{"name":"nodest"},"spec":{"image":"i","transport":{"type":"sse"},"egressBindings":[{"name":"b","port":443}]}}`,
			"needs one of host or cidr, and a port"},
		{"a malformed cidr", "mcpservers", serverNS,
			`{"metadata":{"name":"badcidr"},"spec":{"image":"i","transport":{"type":"sse"},"egressBindings":[{"name":"b","cidr":"203.0.113.0/33","port":443}]}}`,
			"cidr must be a valid CIDR"},
		{"an unknown binding mode", "mcpservers", serverNS,
			`{"metadata":{"name":"badmode"},"spec":{"image":"i","transport":{"type":"sse"},"egressBindings":[{"name":"b","mode":"any","port":443,"host":"a.example.com"}]}}`,
			"spec.egressBindings[0].mode"},
		{"an unknown binding protocol", "mcpservers", serverNS,
			`{"metadata":{"name":"badproto"},"spec":{"image":"i","transport":{"type":"sse"},"egressBindings":[{"name":"b","protocol":"SCTP","port":443,"host":"a.example.com"}]}}`,
			"spec.egressBindings[0].protocol"},
		{"an McpServer name that is not a DNS label", "mcpservers", serverNS,
			`{"metadata":{"name":"dotted.name"},"spec":{"image":"i","transport":{"type":"sse"}}}`, "must be a DNS label"},
		{"an McpServer name over 63 characters", "mcpservers", serverNS,
			`{"metadata":{"name":"` + strings.Repeat("a", 64) + `"},"spec":{"image":"i","transport":{"type":"sse"}}}`, "must be a DNS label"},
		{"a contextId that is not a DNS label", "contexts", serverNS,
			`{"metadata":{"name":"badctx"},"spec":{"contextId":"Not_A_Label"}}`, "spec.contextId"},
		{"a Context without contextId", "contexts", serverNS,
			`{"metadata":{"name":"noctx"},"spec":{}}`, "spec.contextId"},
		{"a Host without contextRef", "hosts", hostNS,
			`{"metadata":{"name":"noref"},"spec":{}}`, "spec.contextRef"},
		{"a Host name that is not a DNS label", "hosts", hostNS,
			`{"metadata":{"name":"host.dotted"},"spec":{"contextRef":"c"}}`, "must be a DNS label"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var obj map[string]any
			require.NoError(t, json.Unmarshal([]byte(tc.obj), &obj))
			u := &unstructured.Unstructured{Object: obj}
			u.SetAPIVersion(clerumv1alpha1.GroupVersion.String())
			u.SetKind(kindOf[tc.gvr])
			gvr := schema.GroupVersionResource{Group: clerumv1alpha1.GroupVersion.Group, Version: "v1alpha1", Resource: tc.gvr}
			_, err := e.dynamic.Resource(gvr).Namespace(tc.ns).Create(context.Background(), u, metav1.CreateOptions{})
			require.Error(t, err)
			assert.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
			assert.Contains(t, err.Error(), tc.message)

			// render judges files with pkg/validation: it must refuse what
			// the API server refuses.
			assert.NotEmpty(t, validateJSON(t, tc.gvr, tc.obj), "pkg/validation accepts what the API server refused")
		})
	}
}

// validateJSON runs pkg/validation on a raw object of resource gvr.
func validateJSON(t *testing.T, gvr, raw string) field.ErrorList {
	t.Helper()
	decode := func(into any) { require.NoError(t, json.Unmarshal([]byte(raw), into)) }
	switch gvr {
	case "mcpservers":
		var o clerumv1alpha1.McpServer
		decode(&o)
		return validation.McpServer(&o)
	case "contexts":
		var o clerumv1alpha1.Context
		decode(&o)
		return validation.Context(&o)
	case "hosts":
		var o clerumv1alpha1.Host
		decode(&o)
		return validation.Host(&o)
	case "sharedfilesystems":
		var o clerumv1alpha1.SharedFileSystem
		decode(&o)
		return validation.SharedFileSystem(&o)
	}
	t.Fatalf("no validator for %s", gvr)
	return nil
}

var kindOf = map[string]string{"mcpservers": "McpServer", "contexts": "Context", "hosts": "Host", "sharedfilesystems": "SharedFileSystem"}

func newServer(name string) *clerumv1alpha1.McpServer {
	return &clerumv1alpha1.McpServer{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: clerumv1alpha1.McpServerSpec{
			Image:     "mongodb/mongodb-mcp-server:1.0",
			Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportSSE},
		},
	}
}

func newContext(name, contextID string, servers ...string) *clerumv1alpha1.Context {
	return &clerumv1alpha1.Context{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       clerumv1alpha1.ContextSpec{ContextID: contextID, McpServers: servers},
	}
}

func newHost(name, contextRef string) *clerumv1alpha1.Host {
	return &clerumv1alpha1.Host{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: clerumv1alpha1.HostSpec{
			ContextRef: contextRef,
			SecretRef:  &clerumv1alpha1.LocalObjectReference{Name: "host-secret"},
			Desktop:    &clerumv1alpha1.DesktopSpec{Enabled: true},
		},
	}
}

// waitListed polls a lister until it returns the object.
func waitListed[T any](t *testing.T, ctx context.Context, get func() (T, error)) T {
	t.Helper()
	var got T
	waitFor(t, ctx, func() bool {
		o, err := get()
		if err != nil {
			return false
		}
		got = o
		return true
	})
	return got
}

func waitFor(t *testing.T, ctx context.Context, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	require.NoError(t, err, "condition not met in time")
}
