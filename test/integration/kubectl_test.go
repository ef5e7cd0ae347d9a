//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/restmapper"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/reasons"
)

// hccCategory is the category every HCC kind is in: `kubectl get hcc`.
const hccCategory = "hcc"

// shortNames are the short names of each HCC resource (docs/kubectl-plugin.md).
var shortNames = map[string][]string{
	"mcpservers":        {"mcps"},
	"contexts":          {"ctx"},
	"hosts":             {"mcph"},
	"sharedfilesystems": {"sfs"},
	"globalfilesystems": {"gfs"},
}

// testCategoryAndShortNames asks the API server's discovery what kubectl
// asks it, and resolves names with the expanders kubectl uses: the
// category hcc is the five HCC resources and nothing else; each short name
// resolves to its own resource, and no built-in resource of the server
// answers to it.
func (e *env) testCategoryAndShortNames(t *testing.T) {
	disco := e.kube.Discovery()
	list, err := disco.ServerResourcesForGroupVersion(clerumv1alpha1.GroupVersion.String())
	require.NoError(t, err)
	served := map[string]metav1.APIResource{}
	for _, r := range list.APIResources {
		if !strings.Contains(r.Name, "/") { // not a subresource
			served[r.Name] = r
		}
	}
	require.Len(t, served, len(shortNames), "the HCC resources served")
	for name, want := range shortNames {
		r, ok := served[name]
		require.True(t, ok, "%s is served", name)
		assert.Equal(t, want, r.ShortNames, "short names of %s", name)
		assert.ElementsMatch(t, []string{hccCategory, "clerum"}, r.Categories, "categories of %s", name)
	}

	// What `kubectl get hcc` lists: kubectl expands a category before it
	// looks for a resource of that name.
	got, ok := restmapper.NewDiscoveryCategoryExpander(disco).Expand(hccCategory)
	require.True(t, ok, "the API server knows the category %s", hccCategory)
	var want []schema.GroupResource
	for name := range shortNames {
		want = append(want, schema.GroupResource{Group: clerumv1alpha1.GroupName, Resource: name})
	}
	assert.ElementsMatch(t, want, got)

	// What `kubectl get mcph` reads, through kubectl's shortcut expander,
	// which warns when a short name could mean another resource.
	groups, err := restmapper.GetAPIGroupResources(disco)
	require.NoError(t, err)
	var warnings []string
	mapper := restmapper.NewShortcutExpander(restmapper.NewDiscoveryRESTMapper(groups), disco,
		func(w string) { warnings = append(warnings, w) })
	for name, short := range shortNames {
		for _, s := range short {
			gvr, err := mapper.ResourceFor(schema.GroupVersionResource{Resource: s})
			require.NoError(t, err, s)
			assert.Equal(t, schema.GroupVersionResource{Group: clerumv1alpha1.GroupName, Version: clerumv1alpha1.GroupVersion.Version, Resource: name}, gvr, "kubectl get %s", s)
		}
	}
	assert.Empty(t, warnings)
	// No resource of the API server itself has one of the short names as
	// its name, singular or short name: kubectl would have to choose.
	_, builtIn, err := disco.ServerGroupsAndResources()
	require.NoError(t, err)
	for _, l := range builtIn {
		if l.GroupVersion == clerumv1alpha1.GroupVersion.String() {
			continue
		}
		for _, r := range l.APIResources {
			for _, short := range shortNames {
				for _, s := range short {
					assert.False(t, r.Name == s || r.SingularName == s || slices.Contains(r.ShortNames, s),
						"%s of %s answers to HCC's short name %s", r.Name, l.GroupVersion, s)
				}
			}
			assert.NotContains(t, r.Categories, hccCategory, "%s of %s is in the category %s", r.Name, l.GroupVersion, hccCategory)
		}
	}
}

// testPrinterColumns writes a status on one object of each kind and reads
// the Table the API server renders for kubectl get: the Ready and Reason
// columns show the status and reason of the kind's Ready condition (for a
// Context, of ContextIDConflict, its only condition), and the kind's own
// columns their fields. Each condition type in a status has its own status
// and reason, so a column that reads the wrong one shows the wrong value.
func (e *env) testPrinterColumns(t *testing.T) {
	ctx := context.Background()
	v1 := e.hcc.ClerumV1alpha1()
	cond := func(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: "set by the test", LastTransitionTime: metav1.Now()}
	}

	server, err := v1.McpServers(serverNS).Create(ctx, newServer("printed"), metav1.CreateOptions{})
	require.NoError(t, err)
	server.Status.Deployed = true
	server.Status.Conditions = []metav1.Condition{
		cond(clerumv1alpha1.ConditionImageAllowed, metav1.ConditionTrue, reasons.ImageAllowed),
		cond(clerumv1alpha1.ConditionReady, metav1.ConditionFalse, reasons.EgressPending),
		cond(clerumv1alpha1.ConditionExternalEgressReady, metav1.ConditionUnknown, reasons.Pending),
	}
	_, err = v1.McpServers(serverNS).UpdateStatus(ctx, server, metav1.UpdateOptions{})
	require.NoError(t, err)

	conflicted, err := v1.Contexts(serverNS).Create(ctx, newContext("printed", "printed-id", "printed"), metav1.CreateOptions{})
	require.NoError(t, err)
	conflicted.Status.Conditions = []metav1.Condition{cond(clerumv1alpha1.ConditionContextIDConflict, metav1.ConditionTrue, reasons.DuplicateContextID)}
	_, err = v1.Contexts(serverNS).UpdateStatus(ctx, conflicted, metav1.UpdateOptions{})
	require.NoError(t, err)
	// A Context that never conflicted has no condition: its cells are empty.
	_, err = v1.Contexts(serverNS).Create(ctx, newContext("printed-quiet", "printed-quiet"), metav1.CreateOptions{})
	require.NoError(t, err)

	host, err := v1.Hosts(hostNS).Create(ctx, newHost("printed", "printed"), metav1.CreateOptions{})
	require.NoError(t, err)
	host.Status.Image = "mcp-host:1"
	host.Status.Conditions = []metav1.Condition{
		cond(clerumv1alpha1.ConditionAuthReady, metav1.ConditionTrue, reasons.CredentialIssued),
		cond(clerumv1alpha1.ConditionReady, metav1.ConditionFalse, reasons.ContextMissing),
		cond(clerumv1alpha1.ConditionSecretsResolved, metav1.ConditionUnknown, reasons.Progressing),
	}
	_, err = v1.Hosts(hostNS).UpdateStatus(ctx, host, metav1.UpdateOptions{})
	require.NoError(t, err)

	size := resource.MustParse("2Gi")
	sfs, err := v1.SharedFileSystems(hostNS).Create(ctx, &clerumv1alpha1.SharedFileSystem{
		ObjectMeta: metav1.ObjectMeta{Name: "printed"}, Spec: clerumv1alpha1.SharedFileSystemSpec{Size: &size}}, metav1.CreateOptions{})
	require.NoError(t, err)
	sfs.Status.Phase, sfs.Status.Endpoint = clerumv1alpha1.FileSystemInitializing, "http://wfc-printed.mcp-host:8080"
	sfs.Status.Conditions = []metav1.Condition{
		cond(clerumv1alpha1.ConditionVolumeBound, metav1.ConditionFalse, reasons.ClaimPending),
		cond(clerumv1alpha1.ConditionReady, metav1.ConditionFalse, reasons.NotOwned),
	}
	_, err = v1.SharedFileSystems(hostNS).UpdateStatus(ctx, sfs, metav1.UpdateOptions{})
	require.NoError(t, err)

	gfs, err := v1.GlobalFileSystems(gfsNS).Create(ctx, &clerumv1alpha1.GlobalFileSystem{
		ObjectMeta: metav1.ObjectMeta{Name: "printed"}, Spec: clerumv1alpha1.GlobalFileSystemSpec{DriveName: "drive-p"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	gfs.Status.Phase, gfs.Status.Endpoint = clerumv1alpha1.FileSystemReady, "http://gfsc-printed.gfs:8080"
	gfs.Status.Conditions = []metav1.Condition{
		cond(clerumv1alpha1.ConditionRootSeeded, metav1.ConditionFalse, reasons.SeedPending),
		cond(clerumv1alpha1.ConditionReady, metav1.ConditionTrue, reasons.Available),
	}
	_, err = v1.GlobalFileSystems(gfsNS).UpdateStatus(ctx, gfs, metav1.UpdateOptions{})
	require.NoError(t, err)

	// The Table API is what kubectl renders: every column, -o wide's
	// (priority 1) included, by name, with the cells of one object.
	row := func(t *testing.T, resource, ns, name string) (columns []string, cells map[string]any) {
		t.Helper()
		raw, err := e.kube.CoreV1().RESTClient().Get().
			AbsPath("/apis/clerum.io/v1alpha1/namespaces", ns, resource, name).
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
			Do(ctx).Raw()
		require.NoError(t, err)
		var table metav1.Table
		require.NoError(t, json.Unmarshal(raw, &table))
		require.Len(t, table.Rows, 1)
		cells = map[string]any{}
		for i, c := range table.ColumnDefinitions {
			columns = append(columns, c.Name)
			cells[c.Name] = table.Rows[0].Cells[i]
		}
		return columns, cells
	}
	for _, tc := range []struct {
		resource, ns, name string
		columns            []string
		cells              map[string]any // a nil value: the cell is empty
	}{{
		resource: "mcpservers", ns: serverNS, name: "printed",
		columns: []string{"Name", "Transport", "Enabled", "Deployed", "Ready", "Reason", "Egress", "Image", "Age"},
		cells: map[string]any{"Transport": "sse", "Enabled": true, "Deployed": true, "Ready": "False", "Reason": reasons.EgressPending,
			"Egress": "Unknown", "Image": "mongodb/mongodb-mcp-server:1.0"},
	}, {
		resource: "contexts", ns: serverNS, name: "printed",
		columns: []string{"Name", "ContextID", "Conflict", "Reason", "Servers", "Age"},
		cells:   map[string]any{"ContextID": "printed-id", "Conflict": "True", "Reason": reasons.DuplicateContextID, "Servers": `["printed"]`},
	}, {
		resource: "contexts", ns: serverNS, name: "printed-quiet",
		columns: []string{"Name", "ContextID", "Conflict", "Reason", "Servers", "Age"},
		cells:   map[string]any{"ContextID": "printed-quiet", "Conflict": nil, "Reason": nil, "Servers": nil},
	}, {
		resource: "hosts", ns: hostNS, name: "printed",
		columns: []string{"Name", "Context", "Ready", "Reason", "Auth", "Image", "Credential-Expires", "Age"},
		cells: map[string]any{"Context": "printed", "Ready": "False", "Reason": reasons.ContextMissing, "Auth": "True",
			"Image": "mcp-host:1", "Credential-Expires": nil},
	}, {
		resource: "sharedfilesystems", ns: hostNS, name: "printed",
		columns: []string{"Name", "Phase", "Ready", "Reason", "Size", "Endpoint", "Age"},
		cells: map[string]any{"Phase": "Initializing", "Ready": "False", "Reason": reasons.NotOwned, "Size": "2Gi",
			"Endpoint": "http://wfc-printed.mcp-host:8080"},
	}, {
		resource: "globalfilesystems", ns: gfsNS, name: "printed",
		columns: []string{"Name", "Drive", "Phase", "Ready", "Reason", "Endpoint", "Age"},
		cells: map[string]any{"Drive": "drive-p", "Phase": "Ready", "Ready": "True", "Reason": reasons.Available,
			"Endpoint": "http://gfsc-printed.gfs:8080"},
	}} {
		t.Run(tc.resource+"/"+tc.name, func(t *testing.T) {
			columns, cells := row(t, tc.resource, tc.ns, tc.name)
			assert.Equal(t, tc.columns, columns)
			for column, want := range tc.cells {
				assert.Equal(t, want, cells[column], "column %s", column)
			}
		})
	}

	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed; the discovery and Table checks above cover what it would show")
	}
	get := func(args ...string) []string {
		t.Helper()
		out, err := exec.Command(kubectl, append([]string{"--kubeconfig", e.cp.Kubeconfig(), "get"}, args...)...).CombinedOutput()
		require.NoError(t, err, "kubectl get %v: %s", args, out)
		return strings.Split(strings.TrimSpace(string(out)), "\n")
	}
	// kubectl get hcc: every kind, through the category.
	names := get(hccCategory, "-A", "-o", "name")
	for _, want := range []string{"mcpserver.clerum.io/printed", "context.clerum.io/printed", "host.clerum.io/printed",
		"sharedfilesystem.clerum.io/printed", "globalfilesystem.clerum.io/printed"} {
		assert.Contains(t, names, want, "kubectl get hcc -A -o name")
	}
	if testing.Verbose() {
		for _, ns := range []string{serverNS, hostNS, gfsNS} {
			t.Logf("kubectl get hcc -n %s -o wide:\n%s", ns, strings.Join(get(hccCategory, "-n", ns, "-o", "wide"), "\n"))
		}
	}
	lines := get("mcph", "-n", hostNS, "printed")
	require.Len(t, lines, 2, lines)
	assert.Equal(t, []string{"NAME", "CONTEXT", "READY", "REASON", "AGE"}, strings.Fields(lines[0]))
	assert.Equal(t, []string{"printed", "printed", "False", reasons.ContextMissing}, strings.Fields(lines[1])[:4])
}
