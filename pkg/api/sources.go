package api

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	listers "github.com/clerum/hcc/pkg/generated/listers/clerum/v1alpha1"
)

// The readers below are the only way handlers see the cluster. Each is the
// read half of a namespace-scoped lister, so production passes the
// informers' listers and tests pass listers over hand-filled indexers, or
// wrappers that count and intercept reads. Objects returned are shared with
// the cache and must not be mutated.

// McpServerReader reads McpServers of the MCP server namespace.
type McpServerReader interface {
	Get(name string) (*v1alpha1.McpServer, error)
	List(selector labels.Selector) ([]*v1alpha1.McpServer, error)
}

// ContextReader reads Contexts of the MCP server namespace.
type ContextReader interface {
	Get(name string) (*v1alpha1.Context, error)
}

// HostReader reads Hosts of the host namespace.
type HostReader interface {
	Get(name string) (*v1alpha1.Host, error)
}

// SecretReader reads Secrets of the MCP server namespace.
type SecretReader interface {
	Get(name string) (*corev1.Secret, error)
}

var (
	_ McpServerReader = (listers.McpServerNamespaceLister)(nil)
	_ ContextReader   = (listers.ContextNamespaceLister)(nil)
	_ HostReader      = (listers.HostNamespaceLister)(nil)
	_ SecretReader    = (corelisters.SecretNamespaceLister)(nil)
)

// Sources are the readers a Handler answers from.
type Sources struct {
	McpServers McpServerReader
	Contexts   ContextReader
	Hosts      HostReader
	Secrets    SecretReader
}
