// Package kittest holds test helpers for reconcilers built on the kit.
//
// A Fixture is every reconciler's unit-test world: fake clientsets that
// act as the API server does where the kit relies on it (a UID and a new
// resourceVersion on each write, the status kept on an update, a
// clerum.io status apply stored), the kit.Deps to build the reconciler
// from, and caches filled through the reconciler's own informers and
// their transforms. A test calls one sync and asserts what it sent:
//
//	func TestCreateThenNothingToWrite(t *testing.T) {
//		f := kittest.NewFixture(t, newServer("s1"), secret("atlas")) // the fake API server
//		c := New(f.Deps(), testConfig)                                 // asks for its informers
//		f.SyncCaches()                                                 // the caches show the server
//
//		_, err := c.syncMcpServer(ctx, cache.ObjectName{Namespace: "mcp-server", Name: "s1"})
//		require.NoError(t, err)
//		assert.Equal(t, []string{"create deployments/s1", "create services/s1", "patch mcpservers/s1/status"}, f.Writes())
//		st := kittest.Applied[*clerumv1alpha1.McpServer](f, "mcp-server", "s1")
//		assert.False(t, st[len(st)-1].Status.Ready)
//		assert.Empty(t, f.Events())
//
//		f.SyncCaches() // the informers deliver the writes
//		_, err = c.syncMcpServer(ctx, cache.ObjectName{Namespace: "mcp-server", Name: "s1"})
//		require.NoError(t, err)
//		assert.Empty(t, f.Writes(), "nothing changed: zero writes")
//	}
//
// The golden files of builders are package golden's.
//
// RoundTrip is how a builder proves that it emits its object as the API
// server defaults it, which the kit's compare-and-update relies on for zero
// writes on an unchanged cluster (kit.Ensure):
//
//	func TestBuildDeploymentRoundTrips(t *testing.T) {
//		server := createMcpServer(t, hcc, newServer("s1")) // the owner, live on the server
//		owner := kit.Owner{Object: server, GVK: mcpServerGVK, IdentityLabel: names.LabelMcpServer}
//		kittest.RoundTrip(t, cp.Config(), kit.Deployments, owner, buildDeployment(server, cfg))
//	}
package kittest

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/clerum/hcc/pkg/controllers/kit"
)

// Writes counts the requests that can change something on the API server
// (every method but GET, HEAD and OPTIONS) sent through a config from
// CountWrites. It is safe for concurrent use.
type Writes struct {
	mu       sync.Mutex
	requests []string // "METHOD path"
	managers []string // each request's fieldManager parameter, "" for none
}

// CountWrites returns a copy of config whose clients count their writes in
// the returned Writes; config itself is not changed.
func CountWrites(config *rest.Config) (*rest.Config, *Writes) {
	w := &Writes{}
	counted := rest.CopyConfig(config)
	wrap := counted.WrapTransport
	counted.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if wrap != nil {
			rt = wrap(rt)
		}
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			switch req.Method {
			case http.MethodGet, http.MethodHead, http.MethodOptions:
			default:
				w.mu.Lock()
				w.requests = append(w.requests, req.Method+" "+req.URL.Path)
				w.managers = append(w.managers, req.URL.Query().Get("fieldManager"))
				w.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	}
	return counted, w
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// Count returns how many writes were sent since the last Reset.
func (w *Writes) Count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.requests)
}

// CountBy returns how many writes since the last Reset match: request is
// "METHOD path", manager the request's fieldManager ("" for none).
func (w *Writes) CountBy(match func(request, manager string) bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for i, r := range w.requests {
		if match(r, w.managers[i]) {
			n++
		}
	}
	return n
}

// String lists the writes since the last Reset, as "METHOD path", for
// failure messages.
func (w *Writes) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.requests, ", ")
}

// Reset forgets the writes counted so far.
func (w *Writes) Reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.requests, w.managers = nil, nil
}

// RoundTrip creates desired on the API server behind config through
// kit.Ensure, as its reconciler would, reads it back as an informer would
// see it, and fails t unless ensuring desired again writes nothing: the
// builder emitted the object as the API server defaults it. No object may
// hold desired's name beforehand. It returns the object as created.
//
// On failure it prints the difference between what the second pass would
// write and what the server has: the defaults the builder must emit.
func RoundTrip[T kit.Child](t testing.TB, config *rest.Config, kind kit.Kind[T], owner kit.Owner, desired T) T {
	t.Helper()
	ctx := context.Background()
	counted, writes := CountWrites(config)
	kube := kubernetes.NewForConfigOrDie(counted)
	children := kit.NewChildren(kube, nil, "kittest", record.NewFakeRecorder(16), nil)

	var absent T
	created, action, err := kit.Ensure(ctx, children, kind, owner, absent, desired)
	if err != nil {
		t.Fatalf("%s %s/%s: first ensure: %v", kind.Name, desired.GetNamespace(), desired.GetName(), err)
	}
	if action != kit.ActionCreate {
		t.Fatalf("%s %s/%s: first ensure did %s, want create (an object already held the name)",
			kind.Name, desired.GetNamespace(), desired.GetName(), action)
	}
	live, err := Get(ctx, kube, kind, created)
	if err != nil {
		t.Fatalf("%s %s/%s: reading back: %v", kind.Name, desired.GetNamespace(), desired.GetName(), err)
	}

	writes.Reset()
	if _, action, err = kit.Ensure(ctx, children, kind, owner, live, desired); err != nil {
		t.Fatalf("%s %s/%s: second ensure: %v", kind.Name, desired.GetNamespace(), desired.GetName(), err)
	}
	if action != kit.ActionNone || writes.Count() != 0 {
		write, _, _ := kit.Plan(kind, owner, live, desired)
		t.Errorf("%s %s/%s: the builder's object is not what the API server keeps: a second ensure did %s (writes: %s); "+
			"emit the server's defaults. Server (-) versus what would be written (+):\n%s",
			kind.Name, desired.GetNamespace(), desired.GetName(), action, writes, kit.Diff(kind, live, write))
	}
	return created
}

// Get reads obj's current state from the API server through kube, for
// tests that mutate an object and ensure it again.
func Get[T kit.Child](ctx context.Context, kube kubernetes.Interface, kind kit.Kind[T], obj T) (T, error) {
	return kind.Client(kube, obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{})
}
