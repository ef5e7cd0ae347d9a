package kit_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kubescheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/render"
)

// BenchmarkCachedBytes is the live heap the built-in kinds' caches hold
// for the children HCC plans for a fleet of 2,000 McpServers in 200
// Contexts and 1,000 Hosts (a fifth of make bench-large's), each decoded
// from protobuf as an informer decodes it, carrying managed fields and a
// server-assigned UID and resourceVersion as the API server's copy does,
// and then passed through a transform: none, strip-only (managed fields
// and the last-applied annotation dropped, nothing shared) and
// StripUnread. MiB-cached is the heap they hold after a GC.
func BenchmarkCachedBytes(b *testing.B) {
	children := plannedChildren(b, 2000, 200, 1000)
	codecs := serializer.NewCodecFactory(kubescheme.Scheme)
	proto := protobuf.NewSerializer(kubescheme.Scheme, kubescheme.Scheme)
	encoded := make([][]byte, len(children))
	for i, c := range children {
		var buf bytes.Buffer
		require.NoError(b, proto.Encode(c, &buf))
		encoded[i] = buf.Bytes()
	}
	decoder := codecs.UniversalDeserializer()
	for _, tc := range []struct {
		name      string
		transform func(any) (any, error)
	}{
		{"none", func(o any) (any, error) { return o, nil }},
		{"strip-only", stripOnly},
		{"strip-unread", kit.StripUnread},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				cached := make([]any, len(encoded))
				for i, data := range encoded {
					obj, _, err := decoder.Decode(data, nil, nil)
					require.NoError(b, err)
					cached[i], err = tc.transform(obj)
					require.NoError(b, err)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB-cached")
				b.ReportMetric(float64(len(cached)), "objects")
				runtime.KeepAlive(cached)
			}
		})
	}
}

// stripOnly is StripUnread without the sharing: what the caches held
// before it.
func stripOnly(obj any) (any, error) {
	o := obj.(metav1.Object)
	o.SetManagedFields(nil)
	if a := o.GetAnnotations(); a != nil {
		delete(a, kit.LastAppliedAnnotation)
	}
	return obj, nil
}

// plannedChildren renders the children of a fleet of servers McpServers
// (each with the Secret its spec.auth names), contexts Contexts and hosts
// Hosts, as the API server holds them: a UID, a resourceVersion and a
// managed-fields entry each.
func plannedChildren(b testing.TB, servers, contexts, hosts int) []k8sruntime.Object {
	b.Helper()
	var in strings.Builder
	per := servers / contexts
	for i := range servers {
		fmt.Fprintf(&in, "---\napiVersion: v1\nkind: Secret\nmetadata: {name: s%05d-auth, namespace: mcp-server}\nstringData: {token: t}\n", i)
		fmt.Fprintf(&in, "---\napiVersion: clerum.io/v1alpha1\nkind: McpServer\nmetadata: {name: s%05d, namespace: mcp-server}\n"+
			"spec: {image: ghcr.io/evenfire-ai/s%05d:1, transport: {type: sse}, auth: {secretRef: {name: s%05d-auth, key: token}}}\n", i, i, i)
	}
	for i := range contexts {
		var names []string
		for s := i * per; s < (i+1)*per; s++ {
			names = append(names, fmt.Sprintf("s%05d", s))
		}
		fmt.Fprintf(&in, "---\napiVersion: clerum.io/v1alpha1\nkind: Context\nmetadata: {name: c%04d, namespace: mcp-server}\n"+
			"spec: {contextId: c%04d, mcpServers: [%s]}\n", i, i, strings.Join(names, ","))
	}
	in.WriteString("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: mcp-host-config, namespace: mcp-host}\n")
	for i := range hosts {
		fmt.Fprintf(&in, "---\napiVersion: clerum.io/v1alpha1\nkind: Host\nmetadata: {name: h%04d, namespace: mcp-host}\nspec: {contextRef: c%04d}\n", i, i%contexts)
	}
	path := filepath.Join(b.TempDir(), "fleet.yaml")
	require.NoError(b, os.WriteFile(path, []byte(in.String()), 0o600))
	cfg, err := config.LoadFrom(config.Render, func(string) (string, bool) { return "", false })
	require.NoError(b, err)
	out, err := render.Render(context.Background(), render.Options{Paths: []string{path}, Config: cfg, Warn: func(string, ...any) {}})
	require.NoError(b, err)

	var objs []k8sruntime.Object
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	decoder := serializer.NewCodecFactory(kubescheme.Scheme).UniversalDeserializer()
	for n := 0; ; n++ {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(b, err)
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		require.NoError(b, err)
		m := obj.(metav1.Object)
		m.SetUID(types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", n)))
		m.SetResourceVersion(fmt.Sprint(1000 + n))
		m.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "hcc-controller", Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{}}}`)}})
		objs = append(objs, obj)
	}
	return objs
}

// StripUnread drops managed fields and nothing else from what HCC's
// children hold as the API server keeps them (a NetworkPolicy keeps its
// last-applied annotation; the others carry none here): every child
// passes through it unchanged but for those, twice over, so the second
// copy of each takes its values from the first.
func TestStripUnreadKeepsEveryChildsContent(t *testing.T) {
	children := plannedChildren(t, 40, 4, 20)
	kinds := map[string]int{}
	for round := range 2 {
		for _, c := range children {
			want := c.DeepCopyObject()
			want.(metav1.Object).SetManagedFields(nil)
			got, err := kit.StripUnread(c.DeepCopyObject())
			require.NoError(t, err)
			require.Equal(t, want, got, "round %d", round)
			kinds[c.GetObjectKind().GroupVersionKind().Kind]++
		}
	}
	for _, kind := range []string{"Deployment", "Service", "NetworkPolicy", "ServiceAccount", "Role", "RoleBinding", "PersistentVolumeClaim", "Secret"} {
		assert.Positive(t, kinds[kind], "the plan has a %s", kind)
	}
}
