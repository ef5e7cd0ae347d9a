//go:build integration

package docs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"github.com/clerum/hcc/internal/testing/controlplane"
	"github.com/clerum/hcc/internal/testing/markdown"
)

// notApplied marks a YAML block that is not a set of Kubernetes objects,
// or not meant to be applied, and says why: `<!-- example: not-applied
// (a Prometheus rule file) -->` on the line before the fence.
var notApplied = regexp.MustCompile(`^example: not-applied \((.+)\)$`)

// TestYAMLExamplesApply: every ```yaml block of the README and docs/ is a
// stream of Kubernetes objects that a kube-apiserver with HCC's CRDs
// accepts by server-side apply, dry run, with strict field validation and
// no warning; or it is marked not-applied, with a reason, and then must
// not be such a stream (a marker left on an example that applies is
// stale). The namespaces the examples name are created first.
func TestYAMLExamplesApply(t *testing.T) {
	type example struct {
		where   string
		block   markdown.Block
		objects []*unstructured.Unstructured
		err     error // decoding
	}
	var examples []example
	namespaces := map[string]bool{}
	for _, d := range documents(t) {
		for _, b := range d.Blocks {
			if b.Info != "yaml" {
				continue
			}
			objs, err := decode(b.Text)
			e := example{where: fmt.Sprintf("%s:%d", d.Path, b.Line), block: b, objects: objs, err: err}
			examples = append(examples, e)
			if b.Marker == "" && err == nil {
				for _, o := range objs {
					if o.GetNamespace() != "" {
						namespaces[o.GetNamespace()] = true
					}
				}
			}
		}
	}
	require.NotEmpty(t, examples, "YAML examples were found")

	cp := controlplane.Start(t, controlplane.Options{})
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(cp.Config())
	for ns := range namespaces {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err, "namespace %s", ns)
		}
	}
	a := newDryRunApplier(t, cp.Config())

	applied, marked, objects := 0, 0, 0
	kinds := map[string]bool{}
	for _, e := range examples {
		if e.block.Marker != "" {
			m := notApplied.FindStringSubmatch(e.block.Marker)
			if !assert.NotNil(t, m, "%s: the marker %q is not `example: not-applied (why)`", e.where, e.block.Marker) {
				continue
			}
			marked++
			if e.err == nil && a.applyAll(ctx, e.objects) == nil {
				t.Errorf("%s: marked not-applied (%s), but it applies: remove the marker", e.where, m[1])
			}
			t.Logf("%s: not applied: %s", e.where, m[1])
			continue
		}
		if e.err != nil {
			t.Errorf("%s: %v (mark the block `<!-- example: not-applied (why) -->` if it is not meant to apply)", e.where, e.err)
			continue
		}
		if err := a.applyAll(ctx, e.objects); err != nil {
			t.Errorf("%s: %v", e.where, err)
			continue
		}
		applied++
		objects += len(e.objects)
		for _, o := range e.objects {
			kinds[o.GetKind()] = true
		}
	}
	t.Logf("%d YAML examples applied (%d objects), %d marked not-applied", applied, objects, marked)
	for _, kind := range []string{"McpServer", "Context", "Host", "SharedFileSystem", "GlobalFileSystem"} {
		assert.True(t, kinds[kind], "an example of every kind was applied: %s", kind)
	}
}

// decode reads text as a stream of Kubernetes objects: each document has
// an apiVersion and a kind (an empty document is skipped).
func decode(text string) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(text)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &obj.Object); err != nil {
			return nil, fmt.Errorf("not YAML: %w", err)
		}
		if obj.GetAPIVersion() == "" || obj.GetKind() == "" {
			return nil, errors.New("a document without apiVersion and kind is not a Kubernetes object")
		}
		out = append(out, obj)
	}
	if len(out) == 0 {
		return nil, errors.New("no object")
	}
	return out, nil
}

// stripComments drops comment-only lines, so a document of comments is
// empty.
func stripComments(doc []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return out
}

// dryRunApplier server-side applies objects, dry run, through a dynamic
// client, and fails on any warning the API server answers with.
type dryRunApplier struct {
	client   dynamic.Interface
	mapper   *restmapper.DeferredDiscoveryRESTMapper
	warnings *warnings
}

func newDryRunApplier(t *testing.T, cfg *rest.Config) *dryRunApplier {
	t.Helper()
	w := &warnings{}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = w
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(t, err)
	client, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	return &dryRunApplier{client: client, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco)), warnings: w}
}

// applyAll applies each object, dry run; the first refusal or warning is
// the error.
func (a *dryRunApplier) applyAll(ctx context.Context, objs []*unstructured.Unstructured) error {
	for _, obj := range objs {
		if err := a.apply(ctx, obj); err != nil {
			return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}

func (a *dryRunApplier) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("no resource serves %s: %w", gvk, err)
	}
	var resource dynamic.ResourceInterface = a.client.Resource(mapping.Resource)
	if mapping.Scope.Name() == "namespace" {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		resource = a.client.Resource(mapping.Resource).Namespace(ns)
	}
	body, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	a.warnings.take()
	_, err = resource.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{
		FieldManager:    "hcc-docs-test",
		Force:           ptr.To(true),
		DryRun:          []string{metav1.DryRunAll},
		FieldValidation: metav1.FieldValidationStrict,
	})
	if err != nil {
		return err
	}
	if w := a.warnings.take(); len(w) > 0 {
		return fmt.Errorf("warnings: %s", strings.Join(w, "; "))
	}
	return nil
}

// warnings collects the API server's warning headers.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.seen
	w.seen = nil
	return out
}
