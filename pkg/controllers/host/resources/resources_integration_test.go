//go:build integration

package resources_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/clerum/hcc/internal/testing/controlplane"
	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/host/resources"
	"github.com/clerum/hcc/pkg/controllers/host/resources/resourcestest"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	"github.com/clerum/hcc/pkg/names"
)

// cp is the one control plane this package's integration tests share.
var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunMain(m, controlplane.Options{}, func(c *controlplane.ControlPlane) { cp = c }))
}

var hostGVK = schema.GroupVersion(clerumv1alpha1.GroupVersion).WithKind("Host")

// world is one test's namespaces and its Host options.
type world struct {
	kube kubernetes.Interface
	hcc  clientset.Interface
	opts resources.Options
}

func newWorld(t *testing.T, suffix string) world {
	t.Helper()
	w := world{kube: kubernetes.NewForConfigOrDie(cp.Config()), hcc: clientset.NewForConfigOrDie(cp.Config()), opts: resourcestest.Options}
	w.opts.HostNamespace, w.opts.ChannelsNamespace = "mcp-host-"+suffix, "channels-"+suffix
	for _, ns := range []string{w.opts.HostNamespace, w.opts.ChannelsNamespace} {
		_, err := w.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	return w
}

// createHost creates h in the host namespace: the live owner the kit needs.
func (w world) createHost(t *testing.T, h *clerumv1alpha1.Host) (*clerumv1alpha1.Host, kit.Owner) {
	t.Helper()
	h = h.DeepCopy()
	h.Namespace, h.UID, h.Generation = w.opts.HostNamespace, "", 0
	live, err := w.hcc.ClerumV1alpha1().Hosts(h.Namespace).Create(context.Background(), h, metav1.CreateOptions{})
	require.NoError(t, err)
	return live, kit.Owner{Object: live, GVK: hostGVK, IdentityLabel: names.LabelHost}
}

// TestBuildersEmitWhatTheAPIServerKeeps creates every object the builders
// make for a Host, with the desktop on and off, and proves that a second
// ensure writes nothing: the builders emit the API server's defaults. The
// channels-namespace objects go through the same kit path, which writes
// them without an owner reference.
func TestBuildersEmitWhatTheAPIServerKeeps(t *testing.T) {
	cases := map[string]struct {
		host *clerumv1alpha1.Host
		opts func(*resources.Options)
	}{
		"plain": {host: resourcestest.NewHost("plain", resourcestest.WithSecretRef("plain-env")), opts: func(o *resources.Options) {
			o.NodeLocalDNSCIDR = netip.MustParsePrefix("169.254.20.10/32")
		}},
		"desktop": {host: resourcestest.NewHost("desk", resourcestest.WithDesktop), opts: func(o *resources.Options) {
			o.ImagePullSecret, o.ConfigMapName, o.WorkspaceStorageClass = "", "", ""
		}},
		"long name": {host: resourcestest.NewHost(strings.Repeat("l", 63), resourcestest.WithDesktop)},
	}
	i := 0
	for name, tc := range cases {
		i++
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, fmt.Sprint("rt-", i))
			if tc.opts != nil {
				tc.opts(&w.opts)
			}
			live, owner := w.createHost(t, tc.host)
			opts := w.opts

			d, err := resources.BuildDeployment(live, "context1", opts)
			require.NoError(t, err)
			kittest.RoundTrip(t, cp.Config(), kit.Deployments, owner, d)
			kittest.RoundTrip(t, cp.Config(), kit.Services, owner, resources.BuildService(live, opts))
			kittest.RoundTrip(t, cp.Config(), kit.PersistentVolumeClaims, owner, resources.BuildWorkspaceClaim(live, opts))
			if live.Spec.DesktopEnabled() {
				kittest.RoundTrip(t, cp.Config(), kit.Secrets, owner, resources.BuildEmptyRuntimeTokenSecret(live, opts))
				kittest.RoundTrip(t, cp.Config(), kit.NetworkPolicies, owner, resources.BuildDesktopPolicy(live, opts))
			} else {
				kittest.RoundTrip(t, cp.Config(), kit.Secrets, owner,
					resources.BuildRuntimeTokenSecret(live, opts, "bootstrap", time.Now().Add(time.Hour)))
			}
			kittest.RoundTrip(t, cp.Config(), kit.ServiceAccounts, owner, resources.BuildServiceAccount(live, opts))
			kittest.RoundTrip(t, cp.Config(), kit.Roles, owner, resources.BuildRole(live, opts))
			kittest.RoundTrip(t, cp.Config(), kit.RoleBindings, owner, resources.BuildRoleBinding(live, opts))

			reader := kittest.RoundTrip(t, cp.Config(), kit.Deployments, owner, resources.BuildChannelReaderDeployment(live, opts))
			assert.Empty(t, reader.OwnerReferences, "no owner reference crosses namespaces")
			kittest.RoundTrip(t, cp.Config(), kit.Services, owner, resources.BuildChannelReaderService(live, opts))
			kittest.RoundTrip(t, cp.Config(), kit.NetworkPolicies, owner, resources.BuildChannelReaderPolicy(live, opts))
		})
	}
}

// TestRoleGrantsOnlyTheHostsOwnObjects acts as a Host's ServiceAccount and
// checks what its Role lets it do: read its own Host and Secrets by name,
// through get and through list/watch filtered on the name (an informer on
// one object), and nothing else.
func TestRoleGrantsOnlyTheHostsOwnObjects(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "rbac")
	live, owner := w.createHost(t, resourcestest.NewHost("alice", resourcestest.WithSecretRef("alice-env")))
	w.createHost(t, resourcestest.NewHost("bob"))
	ns := w.opts.HostNamespace
	for _, name := range []string{names.HostRuntimeTokens("alice"), "alice-env", names.HostRuntimeTokens("bob"), "other"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: map[string]string{"k": "v"}}
		_, err := w.kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	kittest.RoundTrip(t, cp.Config(), kit.ServiceAccounts, owner, resources.BuildServiceAccount(live, w.opts))
	kittest.RoundTrip(t, cp.Config(), kit.Roles, owner, resources.BuildRole(live, w.opts))
	kittest.RoundTrip(t, cp.Config(), kit.RoleBindings, owner, resources.BuildRoleBinding(live, w.opts))

	as := cp.ImpersonatingConfig("system:serviceaccount:"+ns+":"+names.HostIdentity("alice"),
		"system:serviceaccounts", "system:serviceaccounts:"+ns, "system:authenticated")
	pod, podHCC := kubernetes.NewForConfigOrDie(as), clientset.NewForConfigOrDie(as)
	hosts, secrets := podHCC.ClerumV1alpha1().Hosts(ns), pod.CoreV1().Secrets(ns)
	byName := func(name string) metav1.ListOptions {
		return metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}
	}

	allowed := map[string]error{}
	denied := map[string]error{}
	_, allowed["get own Host"] = hosts.Get(ctx, "alice", metav1.GetOptions{})
	_, allowed["list own Host by name"] = hosts.List(ctx, byName("alice"))
	_, allowed["get runtime-token Secret"] = secrets.Get(ctx, names.HostRuntimeTokens("alice"), metav1.GetOptions{})
	_, allowed["get secretRef Secret"] = secrets.Get(ctx, "alice-env", metav1.GetOptions{})
	_, allowed["list runtime-token Secret by name"] = secrets.List(ctx, byName(names.HostRuntimeTokens("alice")))
	watch, err := secrets.Watch(ctx, byName(names.HostRuntimeTokens("alice")))
	if err == nil {
		watch.Stop()
	}
	allowed["watch runtime-token Secret by name"] = err

	_, denied["get another Host"] = hosts.Get(ctx, "bob", metav1.GetOptions{})
	_, denied["list Hosts"] = hosts.List(ctx, metav1.ListOptions{})
	_, denied["watch Hosts"] = hosts.Watch(ctx, metav1.ListOptions{})
	_, denied["update own Host"] = hosts.Update(ctx, live, metav1.UpdateOptions{})
	_, denied["get another Host's runtime-token Secret"] = secrets.Get(ctx, names.HostRuntimeTokens("bob"), metav1.GetOptions{})
	_, denied["get an unrelated Secret"] = secrets.Get(ctx, "other", metav1.GetOptions{})
	_, denied["list Secrets"] = secrets.List(ctx, metav1.ListOptions{})
	denied["delete own runtime-token Secret"] = secrets.Delete(ctx, names.HostRuntimeTokens("alice"), metav1.DeleteOptions{})
	_, denied["list own Host's pods"] = pod.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})

	for what, err := range allowed {
		assert.NoError(t, err, what)
	}
	for what, err := range denied {
		assert.True(t, apierrors.IsForbidden(err), "%s: want Forbidden, got %v", what, err)
	}
}
