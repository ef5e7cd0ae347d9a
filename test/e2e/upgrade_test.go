//go:build integration

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"

	"github.com/clerum/hcc/hack/devcontrolapi"
	"github.com/clerum/hcc/internal/testing/controlplane"
	"github.com/clerum/hcc/internal/testing/testenv"
	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controlapi"
	"github.com/clerum/hcc/pkg/controllers/kit"
)

// The drop-in upgrade of issue 19 (docs/upgrade.md): the seed is stopped
// and HCC started against the cluster the seed left — its children,
// policies and credentials, and the tenants' objects written for it.
// `hcc-controller diff` predicts the first passes exactly (the audit log's
// writes by HCC's account equal diff's), every Host serves after at most
// one pod replacement, no workspace claim is replaced, no credential is issued again, the only
// blocked object is the one diff names, and a second diff is empty.
func TestUpgradeFromSeed(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	seedStorage(t)
	s := &seedCluster{claims: map[string]types.UID{}, credentials: map[string][]byte{}}
	t.Cleanup(func() {
		for _, pv := range s.volumes {
			_ = kube.CoreV1().PersistentVolumes().Delete(context.Background(), pv, metav1.DeleteOptions{})
		}
		_ = kube.StorageV1().StorageClasses().Delete(context.Background(), seedStorageClass, metav1.DeleteOptions{})
	})

	// The tenants' objects, as written for the seed.
	for _, name := range []string{"fetch", "search"} {
		e.create(sseServer(name))
	}
	// A remote server with an image: the seed ignored it (FieldsIgnored).
	tracker := &clerumv1alpha1.McpServer{TypeMeta: serverType, ObjectMeta: metav1.ObjectMeta{Name: "tracker", Namespace: "mcp-server"},
		Spec: clerumv1alpha1.McpServerSpec{
			Image:          "ghcr.io/evenfire-ai/tracker:1",
			Transport:      clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportStreamableHTTP},
			Remote:         &clerumv1alpha1.Remote{URL: "https://140.82.112.21/mcp"},
			EgressBindings: []clerumv1alpha1.EgressBinding{{Name: "tracker", CIDR: "140.82.112.21/32", Port: ptrInt32(443)}},
		}}
	e.create(tracker)
	stdio := func(name string, command ...string) *clerumv1alpha1.McpServer {
		return &clerumv1alpha1.McpServer{TypeMeta: serverType, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "mcp-server"},
			Spec: clerumv1alpha1.McpServerSpec{Image: "ghcr.io/evenfire-ai/" + name + ":1", Command: command, Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportStdio}}}
	}
	e.create(stdio("notes", "mcp-notes", "--stdio"))
	e.create(stdio("scratch")) // no command: the seed could not run it either
	e.create(contextOf("alpha", "fetch", "tracker", "notes", "scratch"))
	e.create(contextOf("beta", "search", "notes"))
	hostContexts := map[string]string{"h1": "alpha", "h2": "beta"}
	for h, c := range hostContexts {
		// spec.secretRef names an unlabelled Opaque Secret, as the seed
		// allowed.
		e.create(&corev1.Secret{TypeMeta: secretType, ObjectMeta: metav1.ObjectMeta{Name: h + "-env", Namespace: "mcp-host"},
			Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"token": []byte("tenant-" + h)}})
		e.create(&clerumv1alpha1.Host{TypeMeta: hostType, ObjectMeta: metav1.ObjectMeta{Name: h, Namespace: "mcp-host"},
			Spec: clerumv1alpha1.HostSpec{ContextRef: c, SecretRef: &clerumv1alpha1.LocalObjectReference{Name: h + "-env"}}})
	}

	// The seed's children: h1's and fetch's with controller references,
	// h2's and search's without (both occur in clusters the seed ran).
	for _, h := range []string{"h1", "h2"} {
		host, err := hcc.ClerumV1alpha1().Hosts("mcp-host").Get(ctx, h, metav1.GetOptions{})
		require.NoError(t, err)
		e.seedHostChildren(s, h, host.UID, hostContexts[h], h+"-env", h == "h1")
	}
	for _, name := range []string{"fetch", "search"} {
		server, err := hcc.ClerumV1alpha1().McpServers("mcp-server").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		e.seedServerChildren(s, name, server.UID, name == "fetch")
	}
	seedPolicies(t, [][2]string{{"alpha", "fetch"}, {"beta", "search"}})
	for claim := range s.claims {
		e.eventually("the volume binder binds "+claim, time.Minute, func() bool {
			c, err := kube.CoreV1().PersistentVolumeClaims("mcp-host").Get(ctx, claim, metav1.GetOptions{})
			return err == nil && c.Status.Phase == corev1.ClaimBound && c.Spec.VolumeName == "pvc-"+string(c.UID)
		})
	}
	e.eventually("the seed's Deployments are available", 2*time.Minute, func() bool {
		for ns, names := range map[string][]string{"mcp-host": s.hosts, "mcp-server": s.servers} {
			for _, name := range names {
				d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil || !kit.DeploymentAvailable(d) {
					return false
				}
			}
		}
		return true
	})
	before := map[string]map[string]corev1.PodTemplateSpec{"mcp-host": templates(t, "mcp-host"), "mcp-server": templates(t, "mcp-server")}
	podsBefore := map[string][]types.UID{}
	for _, h := range s.hosts {
		podsBefore[h] = hostPods(t, h)
		require.Len(t, podsBefore[h], 1, "Host %s runs one pod", h)
	}
	grantsBefore := e.controlAPI.Grants()
	require.Len(t, grantsBefore, len(s.hosts))

	// Stop the seed (it never ran here), run diff, set the cutoff.
	time.Sleep(1100 * time.Millisecond) // the cutoff lies after every seed Secret's creation second
	cutoff := time.Now().UTC().Truncate(time.Second).Format(time.RFC3339)
	upgradeEnv := []string{"HCC_LEADER_ELECT=false", "CONTEXT_MAPPER_HOST_WORKSPACE_STORAGE_CLASS=" + seedStorageClass, "HCC_HOST_ADOPT_CREDENTIALS_CREATED_BEFORE=" + cutoff}
	offset := auditOffset(t)
	report, code := e.diff(upgradeEnv...)
	assert.Equal(t, 1, code, "diff exits 1: there are changes")
	assert.Empty(t, upgradeWrites(controllerWrites(t, offset)), "diff writes nothing, not even a refused write")
	predicted := report.writeKeys()
	// The listings are long; they are logged when the test ends, after any
	// failure's message, so that a CI excerpt of the output's head shows
	// what failed.
	var listing []string
	logLater := func(format string, args ...any) { listing = append(listing, fmt.Sprintf(format, args...)) }
	t.Cleanup(func() {
		for _, l := range listing {
			t.Log(l)
		}
	})
	for _, w := range report.Writes {
		logLater("diff: %s %s %s %s/%s %v %s", w.Controller, w.Action, w.Kind, w.Namespace, w.Name, w.Fields, w.Error)
	}
	for _, r := range report.Refusals {
		logLater("diff refusal: %s %s %s %s/%s %s: %s", r.Controller, r.Type, r.Kind, r.Namespace, r.Name, r.Reason, r.Message)
	}
	t.Logf("diff: network policy certified=%v %s, held back %v", report.NetworkPolicy.Certified, report.NetworkPolicy.Message, report.NetworkPolicy.HeldBack)
	assert.True(t, report.NetworkPolicy.Certified, "the policy pass certifies")
	assert.Empty(t, report.refusals(), "diff refuses nothing: every seed object is taken over")
	assert.Empty(t, report.NetworkPolicy.HeldBack, "no policy is held back")
	{
		assert.Equal(t, []string{"McpServer mcp-server/scratch InvalidSpec"}, report.blocks(), "diff names the stdio server without a command, and nothing else, as blocked")
		for _, want := range []string{
			// the servers the seed could not run, and their allows
			"create deployments mcp-server/tracker", "create configmaps mcp-server/tracker", "create deployments mcp-server/notes",
			"create networkpolicies mcp-server/ctx-alpha-tracker", "create networkpolicies mcp-server/ctx-beta-notes",
			// owner labels on the seed's allows
			"update networkpolicies mcp-server/ctx-alpha-fetch", "update networkpolicies rpc-proxy/rpc-egress-beta-search",
			// the Hosts' channel readers
			"create deployments channels/channel-reader-h1", "create networkpolicies channels/channel-reader-h2-egress",
			// the seed's runtime-token Secrets, adopted (marked), not re-issued
			"update secrets mcp-host/host-h1-mcp-host-runtime-tokens", "update secrets mcp-host/host-h2-mcp-host-runtime-tokens",
		} {
			assert.Contains(t, predicted, want)
		}
		for _, w := range report.Writes {
			assert.False(t, w.Resource == "persistentvolumeclaims" && w.Verb != "update", "a workspace claim is only marked: %s %s", w.Verb, w.Name)
			assert.False(t, w.Verb == "delete" && w.Namespace == "mcp-host", "nothing of a Host is deleted: %s %s", w.Kind, w.Name)
		}
	}

	// Start HCC.
	offset = auditOffset(t)
	hostsUp := watchAvailability(t, s.hosts)
	e.startController("upgrade", upgradeEnv...)
	defer e.cleanUp()
	e.waitConverged(3*time.Minute, report.blockedObjects()...)
	waitQuiet(t, offset, 5*time.Second, time.Minute)
	// hcc-controller being quiet says nothing of the pods it asked for:
	// kube-controller-manager and kwok replace a Host's pod in their own
	// time.
	e.eventually("every Host's rollout is complete", 2*time.Minute, func() bool {
		for _, h := range s.hosts {
			d, err := kube.AppsV1().Deployments("mcp-host").Get(ctx, h, metav1.GetOptions{})
			if err != nil || !rolledOut(d) {
				return false
			}
		}
		return true
	})
	gaps := hostsUp.stop()
	writes := upgradeWrites(succeeded(controllerWrites(t, offset))) // the changes made, as diff predicts changes

	// What HCC wrote is what diff said.
	for _, w := range writes {
		logLater("audit: %s", w)
	}
	assert.Equal(t, predicted, writes, "the audit log's writes by hcc-controller equal diff's")
	assert.Equal(t, report.blocks(), blockedNow(t), "the blocked objects are exactly those diff named")
	t.Logf("blocked now: %v", blockedNow(t))

	// Which pod templates the first pass changed, and which Host pods it
	// replaced.
	after := map[string]map[string]corev1.PodTemplateSpec{"mcp-host": templates(t, "mcp-host"), "mcp-server": templates(t, "mcp-server")}
	changed := map[string][]string{}
	rolled := 0
	for ns, names := range map[string][]string{"mcp-host": s.hosts, "mcp-server": s.servers} {
		for _, name := range names {
			changed[name] = changedFields(before[ns][name], after[ns][name])
			if len(changed[name]) > 0 {
				rolled++
			}
			t.Logf("Deployment %s/%s: %d pod template fields changed: %s", ns, name, len(changed[name]), strings.Join(changed[name], ", "))
		}
	}
	// Every Host keeps serving: it is available again after the upgrade,
	// with its claim and its credential (below). Its pod is replaced at
	// most once — HCC's pod template differs from the seed's, and a Host's
	// Deployment is Recreate (one pod holds the workspace claim), so the
	// replacement has one short gap, which docs/upgrade.md states.
	for _, h := range s.hosts {
		now := hostPods(t, h)
		replaced := !slices.Equal(podsBefore[h], now)
		t.Logf("Host %s: pod replaced %v (%d pod template fields changed); outages %v", h, replaced, len(changed[h]), gaps[h])
		assert.LessOrEqual(t, len(gaps[h]), 1, "Host %s is replaced once at most: outages %v", h, gaps[h])
		assert.Equal(t, replaced, len(gaps[h]) == 1, "Host %s: an outage only with its one replacement", h)
		d, err := kube.AppsV1().Deployments("mcp-host").Get(ctx, h, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Positive(t, d.Status.AvailableReplicas, "Host %s serves after the upgrade", h)
	}

	// No workspace claim is replaced; no credential is issued again.
	for name, uid := range s.claims {
		c, err := kube.CoreV1().PersistentVolumeClaims("mcp-host").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, uid, c.UID, "%s keeps its UID", name)
		assert.Nil(t, c.DeletionTimestamp, "%s is not being deleted", name)
		assert.Equal(t, "pvc-"+string(uid), c.Spec.VolumeName, "%s keeps its volume", name)
	}
	reissued := 0
	for _, h := range s.hosts {
		secret, err := kube.CoreV1().Secrets("mcp-host").Get(ctx, "host-"+h+"-mcp-host-runtime-tokens", metav1.GetOptions{})
		require.NoError(t, err)
		if !slices.Equal(secret.Data["bootstrap-credential"], s.credentials[h]) {
			reissued++
		}
		_, _, err = e.controlAPI.Exchange(string(s.credentials[h]))
		assert.NoError(t, err, "Host %s's seed credential still exchanges", h)
	}
	grantsAfter := e.controlAPI.Grants()
	assert.ElementsMatch(t, grantsBefore, grantsAfter, "the Control API issued no credential")
	assert.Zero(t, reissued, "credentials re-issued")
	assert.Zero(t, report.CredentialsIssued, "diff predicted no issuance")

	// The counts of the note.
	var succeeded []diffWrite
	for _, w := range report.Writes {
		if w.Error == "" {
			succeeded = append(succeeded, w)
		}
	}
	actions := countBy(succeeded, func(w diffWrite) string { return w.Action })
	t.Logf("diff: %d status writes, %d credentials to issue", report.StatusWrites, report.CredentialsIssued)
	t.Logf("upgrade counts: taken over %d, updated %d, created %d, deleted %d, blocked %d, Deployments whose template changed %d, credentials re-issued %d, Control API issuances %d; %d writes in all",
		actions["take-over"], actions["update"], actions["create"], actions["delete"], len(report.blocks()), rolled, reissued, len(grantsAfter)-len(grantsBefore)+reissued, len(writes))

	// A second diff has nothing to do.
	offset = auditOffset(t)
	second, code := e.diff(upgradeEnv...)
	for _, w := range second.Writes {
		t.Logf("second diff: %s %s %s %s/%s %v", w.Controller, w.Action, w.Kind, w.Namespace, w.Name, w.Fields)
	}
	for _, r := range second.Refusals {
		t.Logf("second diff refusal: %s %s %s %s/%s %s: %s", r.Controller, r.Type, r.Kind, r.Namespace, r.Name, r.Reason, r.Message)
	}
	assert.Empty(t, second.Writes, "a second diff predicts no write")
	assert.Equal(t, 0, code, "a second diff exits 0")
	assert.Empty(t, upgradeWrites(controllerWrites(t, offset)), "diff writes nothing, not even a refused write")
}

func ptrInt32(v int32) *int32 { return &v }

// The cluster as the seed leaves it, written by hand from docs/names.md and
// the seed's documented names, labels and lifecycle — never from HCC's
// builders, so a builder bug cannot sit on both sides of the upgrade test.
// Labels are spelled out here for the same reason (pkg/names is not used).
const (
	seedManagedBy  = "clerum.io/managed-by"
	seedManager    = "host-context-controller"
	seedHostLabel  = "clerum.io/host"
	seedServer     = "clerum.io/mcpserver"
	seedContext    = "clerum.io/context"
	seedPolicyType = "clerum.io/policy-type"

	// seedStorageClass is the seed's default
	// CONTEXT_MAPPER_HOST_WORKSPACE_STORAGE_CLASS. Its provisioner does not
	// run: the fixture provisions each workspace volume as a dynamic
	// provisioner would (a PersistentVolume pvc-<claim UID> pre-bound to the
	// claim), and the cluster's volume binder binds the claim to it.
	seedStorageClass = "do-block-storage-retain"
	seedProvisioner  = "example.com/seed-block-storage"
)

// seedCluster is what the fixture created and what the test compares after
// the upgrade.
type seedCluster struct {
	hosts   []string
	servers []string // the servers the seed deployed
	// claims maps a workspace claim's name to its UID.
	claims map[string]types.UID
	// credentials maps a Host to the bootstrap credential the seed stored.
	credentials map[string][]byte
	// volumes are the PersistentVolumes the fixture provisioned.
	volumes []string
}

func seedLabels(kv ...string) map[string]string {
	m := map[string]string{seedManagedBy: seedManager}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// controlledBy is a controller reference to owner, or none when the seed
// variant being built writes none.
func controlledBy(controlled bool, kind, name string, uid types.UID) []metav1.OwnerReference {
	if !controlled {
		return nil
	}
	return []metav1.OwnerReference{{APIVersion: "clerum.io/v1alpha1", Kind: kind, Name: name, UID: uid, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
}

// seedCredential asks the development Control API for a Host's bootstrap
// credential as the seed did: a plain POST with an internal bearer, not
// HCC's client.
func (e *env) seedCredential(host string, uid types.UID) (credential, expiresAt string) {
	e.t.Helper()
	bearer, err := controlapi.SignInternalToken([]byte(hmacSecret), time.Now(), 30*time.Second)
	require.NoError(e.t, err)
	body, _ := json.Marshal(map[string]string{"namespace": "mcp-host", "hostRef": host, "hostUid": string(uid)})
	req, err := http.NewRequest(http.MethodPost, e.devURL+devcontrolapi.RouteBootstrapCredentials, bytes.NewReader(body))
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	require.Equal(e.t, http.StatusOK, resp.StatusCode)
	var out struct{ Credential, ExpiresAt string }
	require.NoError(e.t, json.NewDecoder(resp.Body).Decode(&out))
	return out.Credential, out.ExpiresAt
}

// seedStorage creates the seed's StorageClass, whose provisioner the
// fixture plays.
func seedStorage(t *testing.T) {
	t.Helper()
	class := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: seedStorageClass},
		Provisioner:       seedProvisioner,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimRetain),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	_, err := kube.StorageV1().StorageClasses().Create(context.Background(), class, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

// provision creates the volume a dynamic provisioner creates for claim:
// named pvc-<claim UID>, pre-bound to the claim by its UID.
func provision(t *testing.T, claim *corev1.PersistentVolumeClaim) string {
	t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-" + string(claim.UID), Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": seedProvisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      claim.Spec.Resources.Requests,
			AccessModes:                   claim.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              seedStorageClass,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/hcc-seed/" + string(claim.UID)}},
		},
	}
	_, err := kube.CoreV1().PersistentVolumes().Create(context.Background(), pv, metav1.CreateOptions{})
	require.NoError(t, err)
	return pv.Name
}

// seedHostChildren creates what the seed wrote for Host h (uid) in the host
// namespace, with controller references when controlled. contextID labels
// its pods; secretRef is its spec.secretRef.
func (e *env) seedHostChildren(s *seedCluster, h string, uid types.UID, contextID, secretRef string, controlled bool) {
	e.t.Helper()
	ctx := context.Background()
	ns := "mcp-host"
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: seedLabels(seedHostLabel, h), OwnerReferences: controlledBy(controlled, "Host", h, uid)}
	}
	account := "host-" + h
	tokens := "host-" + h + "-mcp-host-runtime-tokens"
	claimName := h + "-workspace"

	_, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta(account)}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	read := []string{"get", "list", "watch"}
	_, err = kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: meta(account), Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"clerum.io"}, Resources: []string{"hosts"}, ResourceNames: []string{h}, Verbs: read},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{tokens, secretRef}, Verbs: read},
	}}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	_, err = kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta(account),
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: account, Namespace: ns}},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: account},
	}, metav1.CreateOptions{})
	require.NoError(e.t, err)

	// The runtime-token Secret as the seed stored the Control API's
	// answer: the two keys, none of HCC's annotations.
	credential, expiresAt := e.seedCredential(h, uid)
	s.credentials[h] = []byte(credential)
	_, err = kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: meta(tokens), Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"bootstrap-credential": []byte(credential), "expires-at": []byte(expiresAt)}}, metav1.CreateOptions{})
	require.NoError(e.t, err)

	claim, err := kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: meta(claimName),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(seedStorageClass),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
		}}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	s.claims[claimName] = claim.UID
	s.volumes = append(s.volumes, provision(e.t, claim))

	selector := map[string]string{seedManagedBy: seedManager, seedHostLabel: h}
	_, err = kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: meta(h), Spec: corev1.ServiceSpec{
		Selector: selector,
		Ports:    []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
	}}, metav1.CreateOptions{})
	require.NoError(e.t, err)

	podLabels := seedLabels(seedHostLabel, h, seedContext, contextID)
	_, err = kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: meta(h), Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1),
		Selector: &metav1.LabelSelector{MatchLabels: selector},
		Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
			Spec: corev1.PodSpec{
				ServiceAccountName: account,
				ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "clerum"}},
				Containers: []corev1.Container{{
					Name:            "mcp-host",
					Image:           "clerum/mcp-host:0.9.5",
					ImagePullPolicy: corev1.PullAlways,
					Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					EnvFrom:         []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "mcp-host-config"}}}},
					Env: []corev1.EnvVar{
						{Name: "MCP_HOST_NAME", Value: h},
						{Name: "MCP_HOST_NAMESPACE", Value: ns},
						{Name: "MCP_HOST_PORT", Value: "8080"},
						{Name: "MCP_HOST_WORKSPACE_PATH", Value: "/workspace"},
						{Name: "MCP_HOST_GATEWAY_URL", Value: "http://nginx-workflow-approval-gateway.control-plane.svc:8092"},
					},
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi"), corev1.ResourceCPU: resource.MustParse("100m")},
						Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi"), corev1.ResourceCPU: resource.MustParse("500m")},
					},
					VolumeMounts: []corev1.VolumeMount{
						{Name: "workspace", MountPath: "/workspace"},
						{Name: "runtime-tokens", MountPath: "/var/run/secrets/clerum.io/mcp-host-runtime-tokens", ReadOnly: true},
					},
				}},
				Volumes: []corev1.Volume{
					{Name: "workspace", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName}}},
					{Name: "runtime-tokens", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: tokens}}},
				},
			},
		},
	}}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	s.hosts = append(s.hosts, h)
}

// seedServerChildren creates the seed's Deployment and Service of an sse
// McpServer name (uid).
func (e *env) seedServerChildren(s *seedCluster, name string, uid types.UID, controlled bool) {
	e.t.Helper()
	ctx := context.Background()
	ns := "mcp-server"
	labels := seedLabels("app", name, seedServer, name)
	meta := metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, OwnerReferences: controlledBy(controlled, "McpServer", name, uid)}
	_, err := kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name, seedServer: name}},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name:            "mcp-server",
				Image:           "ghcr.io/evenfire-ai/" + name + ":1",
				ImagePullPolicy: corev1.PullIfNotPresent,
				Ports:           []corev1.ContainerPort{{Name: "mcp", ContainerPort: 3000}},
			}}},
		},
	}}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	_, err = kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": name},
		Ports:    []corev1.ServicePort{{Name: "mcp", Port: 3000, TargetPort: intstr.FromInt32(3000), Protocol: corev1.ProtocolTCP}},
	}}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	s.servers = append(s.servers, name)
}

// seedPolicies creates the seed's L0 and L1 policies for the shipped
// runtime namespaces (mcp-server, sandbox-recipes, rpc-proxy, and
// sandbox-ui with minimal infrastructure) and the L2 policies of each
// contextId/server pair in allows: named and labelled by type as the seed
// did, without the owner labels HCC adds.
func seedPolicies(t *testing.T, allows [][2]string) {
	t.Helper()
	ctx := context.Background()
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	port := func(p int32, proto corev1.Protocol) networkingv1.NetworkPolicyPort {
		v := intstr.FromInt32(p)
		return networkingv1.NetworkPolicyPort{Port: &v, Protocol: &proto}
	}
	peer := func(ns string, pods map[string]string) networkingv1.NetworkPolicyPeer {
		return networkingv1.NetworkPolicyPeer{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: pods},
		}
	}
	both := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
	egress := []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	ingress := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	var policies []*networkingv1.NetworkPolicy
	policy := func(ns, name, kind string, spec networkingv1.NetworkPolicySpec) {
		policies = append(policies, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: seedLabels(seedPolicyType, kind)}, Spec: spec})
	}
	for _, ns := range []string{"mcp-server", "sandbox-recipes", "rpc-proxy", "sandbox-ui"} {
		policy(ns, "deny-all-"+ns, "deny-all", networkingv1.NetworkPolicySpec{PolicyTypes: both})
		policy(ns, "allow-dns-egress-"+ns, "infrastructure", networkingv1.NetworkPolicySpec{PolicyTypes: egress,
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{peer("kube-system", map[string]string{"k8s-app": "kube-dns"})},
				Ports: []networkingv1.NetworkPolicyPort{port(53, udp), port(53, tcp)}}}})
		if ns == "sandbox-ui" {
			continue // minimal infrastructure: deny-all and DNS only
		}
		policy(ns, "allow-k8s-api-egress-"+ns, "infrastructure", networkingv1.NetworkPolicySpec{PolicyTypes: egress,
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"clerum.io/k8s-api-egress": "true"}},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.96.0.1/32"}}},
				Ports: []networkingv1.NetworkPolicyPort{port(443, tcp)}}}})
	}
	// The discovery pod classes of allow-hcc-api-egress-NS.
	for ns, pods := range map[string]map[string]string{"rpc-proxy": {"app": "rpc-proxy"}, "sandbox-recipes": {"clerum.io/workflow-mcp-host": "true"}} {
		policy(ns, "allow-hcc-api-egress-"+ns, "infrastructure", networkingv1.NetworkPolicySpec{PolicyTypes: egress,
			PodSelector: metav1.LabelSelector{MatchLabels: pods},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{peer("control-plane", map[string]string{"app": "host-context-controller-api-gateway"})},
				Ports: []networkingv1.NetworkPolicyPort{port(8081, tcp)}}}})
	}
	policy("mcp-server", "allow-host-context-controller-api", "infrastructure", networkingv1.NetworkPolicySpec{PolicyTypes: ingress,
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "host-context-controller"}},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "mcp-host"}}}},
			Ports: []networkingv1.NetworkPolicyPort{port(8081, tcp)}}}})
	for _, a := range allows {
		cid, server := a[0], a[1]
		hostPods := map[string]string{seedManagedBy: seedManager, seedContext: cid}
		serverPods := map[string]string{"app": server}
		policy("mcp-server", "ctx-"+cid+"-"+server, "context-allow", networkingv1.NetworkPolicySpec{PolicyTypes: ingress,
			PodSelector: metav1.LabelSelector{MatchLabels: serverPods},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
				peer("mcp-host", hostPods), peer("rpc-proxy", map[string]string{"app": "rpc-proxy"}), peer("control-plane", map[string]string{"app": "mcp-proxy"}),
			}, Ports: []networkingv1.NetworkPolicyPort{port(3000, tcp)}}}})
		policy("mcp-host", "ctx-"+cid+"-"+server+"-egress", "context-allow", networkingv1.NetworkPolicySpec{PolicyTypes: egress,
			PodSelector: metav1.LabelSelector{MatchLabels: hostPods},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{peer("mcp-server", serverPods)}, Ports: []networkingv1.NetworkPolicyPort{port(3000, tcp)}}}})
		policy("rpc-proxy", "rpc-egress-"+cid+"-"+server, "rpc-proxy-egress", networkingv1.NetworkPolicySpec{PolicyTypes: egress,
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "rpc-proxy"}},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{peer("mcp-server", serverPods)}, Ports: []networkingv1.NetworkPolicyPort{port(3000, tcp)}}}})
	}
	for _, p := range policies {
		// An earlier scenario's controller left its own defaults under
		// these names: the seed's replace them.
		require.NoError(t, ignoreNotFound(kube.NetworkingV1().NetworkPolicies(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})))
		_, err := kube.NetworkingV1().NetworkPolicies(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

// diffReport is the JSON of `hcc-controller diff -o json`.
type diffReport struct {
	Writes   []diffWrite `json:"writes"`
	Refusals []struct {
		Controller string `json:"controller"`
		Type       string `json:"type"`
		Kind       string `json:"kind"`
		Namespace  string `json:"namespace"`
		Name       string `json:"name"`
		Reason     string `json:"reason"`
		Message    string `json:"message"`
	} `json:"refusals"`
	StatusWrites      int `json:"statusWrites"`
	CredentialsIssued int `json:"credentialsIssued"`
	NetworkPolicy     struct {
		Certified bool   `json:"certified"`
		Message   string `json:"message"`
		HeldBack  []struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
			Reason    string `json:"reason"`
		} `json:"heldBack"`
	} `json:"networkPolicy"`
}

// diffWrite is one write diff predicts.
type diffWrite struct {
	Controller string   `json:"controller"`
	Verb       string   `json:"verb"`
	Action     string   `json:"action"`
	Group      string   `json:"group"`
	Resource   string   `json:"resource"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace"`
	Name       string   `json:"name"`
	Fields     []string `json:"fields"`
	Error      string   `json:"error"`
}

// writeKeys are the writes of the report that would succeed, as "verb
// resource namespace/name", sorted. (A write the overlay refuses, such as a
// create that meets an object created meanwhile, carries its error; the
// audit log lists successful writes only.)
func (r diffReport) writeKeys() []string {
	var out []string
	for _, w := range r.Writes {
		if w.Error != "" {
			continue
		}
		out = append(out, w.Verb+" "+w.Resource+" "+w.Namespace+"/"+w.Name)
	}
	sort.Strings(out)
	return out
}

// blocks are the report's blocked objects as "Kind namespace/name reason".
func (r diffReport) blocks() []string {
	var out []string
	for _, f := range r.Refusals {
		if f.Type == "block" {
			out = append(out, f.Kind+" "+f.Namespace+"/"+f.Name+" "+f.Reason)
		}
	}
	sort.Strings(out)
	return out
}

// refusals are the report's refused objects (type refuse) as "Kind
// namespace/name reason".
func (r diffReport) refusals() []string {
	var out []string
	for _, f := range r.Refusals {
		if f.Type != "block" {
			out = append(out, f.Kind+" "+f.Namespace+"/"+f.Name+" "+f.Reason)
		}
	}
	sort.Strings(out)
	return out
}

// blockedObjects are the report's blocked objects as "Kind name", as
// waitConverged takes them.
func (r diffReport) blockedObjects() []string {
	var out []string
	for _, f := range r.Refusals {
		if f.Type == "block" {
			out = append(out, f.Kind+" "+f.Name)
		}
	}
	return out
}

// diff runs `hcc-controller diff -o json` as the controller's service
// account, configured as the controller is, and returns its report and
// exit code.
func (e *env) diff(extra ...string) (diffReport, int) {
	e.t.Helper()
	dir, err := binaries()
	require.NoError(e.t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "hcc-controller"), "diff", "--kubeconfig", controllerKubeconfig, "-o", "json")
	cmd.Env = append(controlplane.BinaryEnv(), e.controllerEnv("diff", testenv.FreePort(e.t), extra...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(e.t, err)
	}
	require.LessOrEqual(e.t, code, 1, "diff failed:\n%s", stderr.String())
	var r diffReport
	require.NoError(e.t, json.Unmarshal(stdout.Bytes(), &r), "diff's output:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	return r, code
}

// upgradeWrites are writes (controllerWrites, or the succeeded of them)
// as "verb resource namespace/name", sorted: status subresources and
// events left out (leases are not in the audit log).
func upgradeWrites(writes []controlplane.AuditEvent) []string {
	var out []string
	for _, w := range writes {
		r := w.ObjectRef
		if r.Subresource == "status" || r.Resource == "events" || r.Resource == "leases" {
			continue
		}
		name := r.Subresource
		if name != "" {
			name = "/" + name
		}
		out = append(out, w.Verb+" "+r.Resource+name+" "+r.Namespace+"/"+r.Name)
	}
	sort.Strings(out)
	return out
}

// availability records, from a watch of the Hosts' pods, every stretch of
// time in which a Host had no pod serving: none Ready, or only ones being
// deleted. It watches pods, not the Deployment's status: a Recreate
// rollout always has such a stretch (the old pod is gone before the new
// one is created), but the Deployment's availableReplicas, summed from its
// ReplicaSets' own lagging statuses, may never show it.
type availability struct {
	mu      sync.Mutex
	serving map[string]map[types.UID]bool // Host -> its serving pods
	down    map[string]time.Time          // Host -> since when nothing serves
	gaps    map[string][]string           // Host -> its outages, "from +duration"
	cancel  context.CancelFunc
	done    chan struct{}
}

func watchAvailability(t *testing.T, hosts []string) *availability {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a := &availability{serving: map[string]map[types.UID]bool{}, down: map[string]time.Time{}, gaps: map[string][]string{}, cancel: cancel, done: make(chan struct{})}
	selector := seedHostLabel + " in (" + strings.Join(hosts, ",") + ")"
	list, err := kube.CoreV1().Pods("mcp-host").List(ctx, metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	for _, h := range hosts {
		a.serving[h] = map[types.UID]bool{}
	}
	// The list is one moment: its pods are recorded together, so a Host
	// whose serving pod is listed after one that does not serve has no
	// outage between them.
	for i := range list.Items {
		a.record(&list.Items[i], false)
	}
	for _, h := range hosts {
		require.NotEmpty(t, a.serving[h], "Host %s serves before the upgrade", h)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.LabelSelector = selector
		return kube.CoreV1().Pods("mcp-host").Watch(ctx, o)
	}})
	require.NoError(t, err)
	go func() {
		defer close(a.done)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				if p, ok := ev.Object.(*corev1.Pod); ok {
					a.observe(p, ev.Type == watch.Deleted)
				}
			}
		}
	}()
	return a
}

// record notes whether one pod serves, and returns its Host's serving
// pods (nil for a pod of no watched Host).
func (a *availability) record(p *corev1.Pod, deleted bool) map[types.UID]bool {
	pods := a.serving[p.Labels[seedHostLabel]]
	if pods == nil {
		return nil
	}
	if !deleted && p.DeletionTimestamp == nil && podReady(p) {
		pods[p.UID] = true
	} else {
		delete(pods, p.UID)
	}
	return pods
}

// observe records one watched change of a pod, and the start or end of
// its Host's outage.
func (a *availability) observe(p *corev1.Pod, deleted bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	pods := a.record(p, deleted)
	if pods == nil {
		return
	}
	h := p.Labels[seedHostLabel]
	since, wasDown := a.down[h]
	switch {
	case len(pods) == 0 && !wasDown:
		a.down[h] = time.Now()
	case len(pods) > 0 && wasDown:
		delete(a.down, h)
		a.gaps[h] = append(a.gaps[h], since.UTC().Format("15:04:05.000")+" +"+time.Since(since).Round(time.Millisecond).String())
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// rolledOut reports whether d's rollout is complete: its controller saw
// the current spec, and every replica runs it and is available.
func rolledOut(d *appsv1.Deployment) bool {
	want := ptr.Deref(d.Spec.Replicas, 1)
	st := d.Status
	return st.ObservedGeneration >= d.Generation && st.Replicas == want && st.UpdatedReplicas == want && st.AvailableReplicas == want
}

// stop ends the watch and returns the outages, an unfinished one included.
func (a *availability) stop() map[string][]string {
	a.cancel()
	<-a.done
	a.mu.Lock()
	defer a.mu.Unlock()
	for name, since := range a.down {
		a.gaps[name] = append(a.gaps[name], since.UTC().Format("15:04:05.000")+" still down")
	}
	return a.gaps
}

// templates are the pod templates of the Deployments of ns, by name.
func templates(t *testing.T, ns string) map[string]corev1.PodTemplateSpec {
	t.Helper()
	list, err := kube.AppsV1().Deployments(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]corev1.PodTemplateSpec{}
	for _, d := range list.Items {
		out[d.Name] = d.Spec.Template
	}
	return out
}

// changedFields are the paths at which two JSON documents differ: a
// member present on one side only, or a leaf (or a list of another
// length) that differs.
func changedFields(before, after any) []string {
	var out []string
	var walk func(path string, a, b any)
	walk = func(path string, a, b any) {
		am, aok := a.(map[string]any)
		bm, bok := b.(map[string]any)
		if aok && bok {
			keys := map[string]bool{}
			for k := range am {
				keys[k] = true
			}
			for k := range bm {
				keys[k] = true
			}
			for k := range keys {
				walk(strings.TrimPrefix(path+"."+k, "."), am[k], bm[k])
			}
			return
		}
		al, aok := a.([]any)
		bl, bok := b.([]any)
		if aok && bok && len(al) == len(bl) {
			for i := range al {
				walk(path+"["+strconv.Itoa(i)+"]", al[i], bl[i])
			}
			return
		}
		if !reflect.DeepEqual(a, b) {
			out = append(out, path)
		}
	}
	walk("", toJSON(before), toJSON(after))
	sort.Strings(out)
	return out
}

func toJSON(v any) any {
	raw, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(raw, &out)
	return out
}

// hostPods are the UIDs of Host h's pods that are not terminating.
func hostPods(t *testing.T, h string) []types.UID {
	t.Helper()
	pods, err := kube.CoreV1().Pods("mcp-host").List(context.Background(), metav1.ListOptions{LabelSelector: seedHostLabel + "=" + h})
	require.NoError(t, err)
	var out []types.UID
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p.UID)
		}
	}
	slices.Sort(out)
	return out
}

// blockedNow are the McpServers and Hosts whose Ready condition is False
// for their generation, as "Kind namespace/name reason".
func blockedNow(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	servers, err := hcc.ClerumV1alpha1().McpServers("mcp-server").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, s := range servers.Items {
		if c := meta.FindStatusCondition(s.Status.Conditions, clerumv1alpha1.ConditionReady); c != nil && c.Status == metav1.ConditionFalse {
			out = append(out, "McpServer "+s.Namespace+"/"+s.Name+" "+c.Reason)
		}
	}
	hosts, err := hcc.ClerumV1alpha1().Hosts("mcp-host").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, h := range hosts.Items {
		if c := meta.FindStatusCondition(h.Status.Conditions, clerumv1alpha1.ConditionReady); c != nil && c.Status == metav1.ConditionFalse {
			out = append(out, "Host "+h.Namespace+"/"+h.Name+" "+c.Reason)
		}
	}
	sort.Strings(out)
	return out
}

// waitQuiet waits until hcc-controller has made no write for quiet.
func waitQuiet(t *testing.T, offset int64, quiet, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last, since := len(upgradeWrites(controllerWrites(t, offset))), time.Now()
	for time.Since(since) < quiet {
		require.True(t, time.Now().Before(deadline), "hcc-controller still writing after %s", timeout)
		time.Sleep(500 * time.Millisecond)
		if n := len(upgradeWrites(controllerWrites(t, offset))); n != last {
			last, since = n, time.Now()
		}
	}
}

func countBy[T any](items []T, key func(T) string) map[string]int {
	out := map[string]int{}
	for _, it := range items {
		out[key(it)]++
	}
	return out
}
