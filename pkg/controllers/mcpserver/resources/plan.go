package resources

import (
	"errors"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/imagepolicy"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
	"github.com/clerum/hcc/pkg/workload"
)

// GVK is the owners' kind, for controller references.
var GVK = schema.GroupVersion(clerumv1alpha1.GroupVersion).WithKind("McpServer")

// Plan is the pure decision of one sync, for render: the children s gets,
// or why it gets none. secrets looks up Secrets with digested values. The
// children carry a controller reference without a UID; the controller's
// sync writes what Build returns and kit.Ensure sets the reference from the
// live owner.
func Plan(s *clerumv1alpha1.McpServer, opts Options, images *imagepolicy.Policy, enforce bool,
	secrets func(name string) (*corev1.Secret, error), gateOpen bool) (children []runtime.Object, block, why string, err error) {
	check, err := CheckSecrets(s, opts.DigestKey, secrets)
	if err != nil {
		return nil, "", "", err
	}
	image := JudgeImage(images, s)
	b, buildErr := Build(s, opts, check.Digest)
	block = BlockReason(s, check, imagepolicy.Enforced(images, enforce), buildErr, func() bool { return gateOpen })
	switch block {
	case "":
	case reasons.SecretsMissing:
		return nil, block, check.Message(), nil
	case reasons.ImageNotAllowed:
		return nil, block, image.Message, nil
	case reasons.InvalidSpec:
		return nil, block, buildErr.Error(), nil
	default:
		return nil, block, "its egress bindings are not all allowed", nil
	}
	own := []workload.Object{b.Deployment, b.Service}
	if b.ConfigMap != nil {
		own = append(own, b.ConfigMap)
	}
	return workload.ControlledBy(GVK, s.Name, own...), "", "", nil
}

// Children holds the children the builders produce for one server: the
// one list the controller's sync ensures and Plan returns.
type Children struct {
	Deployment *appsv1.Deployment
	Service    *corev1.Service
	ConfigMap  *corev1.ConfigMap // remote servers only
}

// Build returns s's children in its namespace; digest is the envSecret
// digest of its pod template (SecretCheck.Digest). A reserved name or a
// spec that does not build is an error, and nothing is built.
func Build(s *clerumv1alpha1.McpServer, opts Options, digest string) (Children, error) {
	var b Children
	var err error
	if names.ReservedMcpServerName(s.Name) {
		return b, ErrReservedName
	}
	if b.Deployment, err = BuildDeployment(s, s.Namespace, opts, digest); err != nil {
		return b, err
	}
	if b.ConfigMap, err = BuildProxyConfig(s, s.Namespace); err != nil {
		return b, err
	}
	b.Service = BuildService(s, s.Namespace)
	return b, nil
}

// BlockReason is what keeps s from deploying, or "": a reserved name,
// missing Secrets, an image the allowlist refuses in enforce mode (refused,
// imagepolicy.Enforced: nil in audit mode), a spec that does not build, or
// (for an enabled server) a closed egress gate. The controller and render
// judge alike through it.
func BlockReason(s *clerumv1alpha1.McpServer, secrets SecretCheck, refused func(*clerumv1alpha1.McpServer) bool, buildErr error, gateOpen func() bool) string {
	switch {
	case errors.Is(buildErr, ErrReservedName):
		return reasons.InvalidSpec
	case len(secrets.Missing) > 0:
		return reasons.SecretsMissing
	case refused != nil && refused(s):
		return reasons.ImageNotAllowed
	case buildErr != nil:
		return reasons.InvalidSpec
	case s.Spec.IsEnabled() && !gateOpen():
		return reasons.EgressPending
	}
	return ""
}

// Stops reports whether a blocked, enabled server's running Deployment
// must stop, not merely be kept from being written: enforce mode refuses
// its image, or a Secret it names is one no server may read. Each is
// judged on its own, whichever block BlockReason reports first: a Secret
// deleted for a moment must not keep a refused image running. A Secret that
// is only missing (deleted, not yet created) leaves running pods alone.
func Stops(s *clerumv1alpha1.McpServer, secrets SecretCheck, refused func(*clerumv1alpha1.McpServer) bool) bool {
	return secrets.Forbidden || (refused != nil && refused(s))
}

// ImageVerdict is the allowlist's answer for one server.
type ImageVerdict struct {
	Allowed bool
	Reason  string
	Message string
}

// JudgeImage judges spec.image only: a remote server runs the platform's
// proxy, and platform images (bridge, proxy) are never judged.
func JudgeImage(images *imagepolicy.Policy, s *clerumv1alpha1.McpServer) ImageVerdict {
	v, judged := images.JudgeServer(s)
	if !judged {
		return ImageVerdict{Allowed: true, Reason: reasons.PlatformImage,
			Message: "a remote server runs the platform's egress proxy; spec.image is not run"}
	}
	if v.Allowed {
		return ImageVerdict{Allowed: true, Reason: reasons.ImageAllowed, Message: v.Message()}
	}
	return ImageVerdict{Reason: string(v.Reason), Message: v.Message()}
}
