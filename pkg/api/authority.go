package api

import (
	"errors"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
)

// authority is the live state a verified token stands for: the Host it
// names, with the token's UID, and the Context that Host refers to. It is
// a snapshot of cache objects and must not be mutated.
type authority struct {
	claims  HostClaims
	host    *v1alpha1.Host
	context *v1alpha1.Context
}

// resolveAuthority maps verified claims to live objects. The token says who
// the caller is; only the live Host and Context say what it may see, so a
// Host deleted and recreated under the same name (a new UID) or pointed at
// a missing Context has no authority, whatever its token claims. A Host or
// Context being deleted has none either, and neither has a Context the
// controller ignores for its contextId conflict. Lister errors other than
// not-found cannot happen on an informer cache; they fail closed too.
func resolveAuthority(src Sources, claims HostClaims) (authority, error) {
	host, err := src.Hosts.Get(claims.HostRef)
	if err != nil || host.DeletionTimestamp != nil {
		return authority{}, failHostMissing
	}
	if host.UID != claims.HostUID {
		return authority{}, failHostUIDMismatch
	}
	ctx, err := src.Contexts.Get(host.Spec.ContextRef)
	if err != nil || ctx.DeletionTimestamp != nil ||
		meta.IsStatusConditionTrue(ctx.Status.Conditions, v1alpha1.ConditionContextIDConflict) {
		return authority{}, failContextMissing
	}
	return authority{claims: claims, host: host, context: ctx}, nil
}

// grantedServer returns the server called name if ctx grants it and it is
// offered. Every negative answer is the same false, so callers cannot tell
// an ungranted name from a missing or disabled server.
func grantedServer(ctx *v1alpha1.Context, name string, servers McpServerReader) (*v1alpha1.McpServer, bool) {
	if !slices.Contains(ctx.Spec.McpServers, name) {
		return nil, false
	}
	s, err := servers.Get(name)
	if err != nil || !offered(s) {
		return nil, false
	}
	return s, true
}

// grantedServers returns every offered server ctx grants, sorted by name so
// that every replica lists them in the same order.
func grantedServers(ctx *v1alpha1.Context, servers McpServerReader) []*v1alpha1.McpServer {
	names := slices.Clone(ctx.Spec.McpServers)
	slices.Sort(names)
	names = slices.Compact(names)
	granted := make([]*v1alpha1.McpServer, 0, len(names))
	for _, name := range names {
		if s, err := servers.Get(name); err == nil && offered(s) {
			granted = append(granted, s)
		}
	}
	return granted
}

// withheld reports whether the credential of a granted server s is kept
// from every Host: the image allowlist refuses it in enforce mode (refused,
// nil in audit mode), the controller reports it refused it in enforce mode
// (controllerRefused), or its name is reserved for a platform workload (an
// object from before the CRD refused such names), so the operator runs
// nothing of it. Such a server is still listed, deployed and ready false;
// its credential route answers the uniform 404.
func withheld(s *v1alpha1.McpServer, refused func(*v1alpha1.McpServer) bool) bool {
	return names.ReservedMcpServerName(s.Name) || (refused != nil && refused(s)) || controllerRefused(s)
}

// reasonImageNotAllowed is the controller's reason for ImageAllowed False
// in enforce mode (reasons.ImageNotAllowed; pkg/api may not import the
// controllers, and a test keeps the two equal).
const reasonImageNotAllowed = "ImageNotAllowed"

// controllerRefused reports whether s's status says the controller refused
// its image in enforce mode for the current spec: ImageAllowed False with
// reason ImageNotAllowed, observed for s's generation.
//
// Enforce mode is set on each binary, and an overlay may set it on the
// controller alone; hcc-api in audit mode would then hand out the
// credential of a server the controller scaled to zero. The status covers
// that gap. It can only withhold, never release: hcc-api's own judgement
// (refused) still withholds whatever the status says, since a status is
// written late and by whoever may write it (docs/http-api.md). A verdict
// from an older generation is ignored, so that a fixed image is not kept
// withheld until the controller catches up; an AuditOnly verdict (audit
// mode, deployed anyway) withholds nothing.
func controllerRefused(s *v1alpha1.McpServer) bool {
	c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionImageAllowed)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == reasonImageNotAllowed &&
		c.ObservedGeneration == s.Generation
}

// offered reports whether a server may be handed to a Host: enabled and not
// on its way out.
func offered(s *v1alpha1.McpServer) bool {
	return s.DeletionTimestamp == nil && s.Spec.IsEnabled()
}

// revalidate re-reads, after a credential was read, everything the answer
// is made of, so that a change racing the read wins: a Host deleted,
// recreated or moved to another Context; a server ungranted, disabled,
// given an image enforce mode refuses, replaced, or pointed at another
// Secret or key; or the Secret replaced or
// written (another UID or resourceVersion) after secret, the one read, was
// taken. It returns the failure of the authority when the caller's
// authority no longer holds, and errNotGranted for every other change.
//
// A changed server or Secret is answered like an ungranted server (404),
// not like a bad token (401): the caller's token and Host still stand, and
// a 401 would send mcp-host to exchange its credential for a new token
// that would not help. The value read may be stale, so it stays here;
// mcp-host asks again and is answered from the current objects.
func revalidate(src Sources, a authority, server *v1alpha1.McpServer, secret *corev1.Secret, refused func(*v1alpha1.McpServer) bool) error {
	now, err := resolveAuthority(src, a.claims)
	if err != nil {
		return err
	}
	s, ok := grantedServer(now.context, server.Name, src.McpServers)
	if !ok || withheld(s, refused) || s.UID != server.UID || !sameAuth(s.Spec.Auth, server.Spec.Auth) {
		return errNotGranted
	}
	if !sameSecret(credentialSecret(src.Secrets, s), secret) {
		return errNotGranted
	}
	return nil
}

// sameAuth reports whether a and b name the same Secret key, or both none.
func sameAuth(a, b *v1alpha1.Auth) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.SecretRef == b.SecretRef
}

// sameSecret reports whether a and b are the same version of one Secret,
// or both absent. Within one object, a resourceVersion names one state.
func sameSecret(a, b *corev1.Secret) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.UID == b.UID && a.ResourceVersion == b.ResourceVersion
}

// errNotGranted is the grant failure, answered with the uniform 404.
var errNotGranted = errors.New("server not granted")
