// Package validation checks clerum.io objects against the rules their CRD
// schemas enforce in the API server. Objects HCC reads from a cluster have
// passed those rules already; objects `hcc-controller render` reads from
// files have not, and render must treat an object the API server would
// refuse as bad input rather than plan from it. An integration test feeds the
// same invalid objects to the API server and to these functions.
package validation

import (
	"net/netip"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
)

// Patterns copied from the kubebuilder markers in pkg/apis.
var (
	dnsLabel  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	secretKey = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)
	envName   = regexp.MustCompile(`^[-._a-zA-Z][-._a-zA-Z0-9]*$`)
	mcpPath   = regexp.MustCompile(`^/[-._~a-zA-Z0-9/]*$`)
	remoteURL = regexp.MustCompile(`^https?://[^\s/?#]+([/?#]\S*)?$`)
	hostname  = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?\.?$`)
	// relativePath: segments of [-._a-zA-Z0-9], none of them "." or "..",
	// so a directory never climbs out of the volume.
	relativePath = regexp.MustCompile(`^([-._a-zA-Z0-9]*[-_a-zA-Z0-9][-._a-zA-Z0-9]*|\.{3,})(/([-._a-zA-Z0-9]*[-_a-zA-Z0-9][-._a-zA-Z0-9]*|\.{3,}))*$`)
)

// McpServer returns what the API server would refuse in s.
func McpServer(s *clerumv1alpha1.McpServer) field.ErrorList {
	errs := objectName(s.Name)
	spec, p := &s.Spec, field.NewPath("spec")
	errs = append(errs, maxLen(p.Child("description"), spec.Description, 1024)...)
	if spec.Remote == nil && spec.Image == "" {
		errs = append(errs, field.Required(p.Child("image"), "image is required unless remote is set"))
	}
	errs = append(errs, maxLen(p.Child("image"), spec.Image, 512)...)
	errs = append(errs, maxLen(p.Child("contextRef"), spec.ContextRef, 253)...)

	t := p.Child("transport")
	switch spec.Transport.Type {
	case clerumv1alpha1.TransportSSE, clerumv1alpha1.TransportStreamableHTTP, clerumv1alpha1.TransportStdio:
	case "":
		errs = append(errs, field.Required(t.Child("type"), ""))
	default:
		errs = append(errs, field.NotSupported(t.Child("type"), spec.Transport.Type,
			[]clerumv1alpha1.TransportType{clerumv1alpha1.TransportSSE, clerumv1alpha1.TransportStreamableHTTP, clerumv1alpha1.TransportStdio}))
	}
	errs = append(errs, port(t.Child("port"), spec.Transport.Port)...)
	if spec.Transport.Path != "" {
		errs = append(errs, pattern(t.Child("path"), spec.Transport.Path, mcpPath, 256)...)
	}

	if spec.Remote != nil {
		errs = append(errs, pattern(p.Child("remote", "url"), spec.Remote.URL, remoteURL, 2048)...)
	}
	if es := spec.EnvSecret; es != nil {
		ep := p.Child("envSecret")
		errs = append(errs, required(ep.Child("name"), es.Name, 253)...)
		for i, k := range es.Keys {
			kp := ep.Child("keys").Index(i)
			errs = append(errs, pattern(kp.Child("secretKey"), k.SecretKey, secretKey, 253)...)
			errs = append(errs, pattern(kp.Child("envName"), k.EnvName, envName, 253)...)
		}
	}
	if spec.Auth != nil {
		ap := p.Child("auth", "secretRef")
		errs = append(errs, required(ap.Child("name"), spec.Auth.SecretRef.Name, 253)...)
		errs = append(errs, pattern(ap.Child("key"), spec.Auth.SecretRef.Key, secretKey, 253)...)
	}
	if r := spec.Replicas; r != nil && (*r < 0 || *r > 20) {
		errs = append(errs, field.Invalid(p.Child("replicas"), *r, "must be between 0 and 20"))
	}
	if r := spec.Resources; r != nil {
		errs = append(errs, resourceBounds(p.Child("resources", "limits"), r.Limits)...)
		errs = append(errs, resourceBounds(p.Child("resources", "requests"), r.Requests)...)
	}
	return append(errs, egressBindings(p.Child("egressBindings"), spec.EgressBindings)...)
}

// The CRD's bounds on an McpServer's resources.
var (
	maxServerCPU    = resource.MustParse("16")
	maxServerMemory = resource.MustParse("64Gi")
)

func resourceBounds(p *field.Path, list corev1.ResourceList) field.ErrorList {
	var errs field.ErrorList
	if q, ok := list[corev1.ResourceCPU]; ok && q.Cmp(maxServerCPU) > 0 {
		errs = append(errs, field.Invalid(p.Child("cpu"), q.String(), "may be at most 16 CPUs"))
	}
	if q, ok := list[corev1.ResourceMemory]; ok && q.Cmp(maxServerMemory) > 0 {
		errs = append(errs, field.Invalid(p.Child("memory"), q.String(), "may be at most 64Gi"))
	}
	return errs
}

func egressBindings(p *field.Path, bindings []clerumv1alpha1.EgressBinding) field.ErrorList {
	var errs field.ErrorList
	if len(bindings) > 64 {
		errs = append(errs, field.TooMany(p, len(bindings), 64))
	}
	seen := sets.New[string]()
	for i := range bindings {
		b, bp := &bindings[i], p.Index(i)
		errs = append(errs, pattern(bp.Child("name"), b.Name, dnsLabel, 63)...)
		if seen.Has(b.Name) {
			errs = append(errs, field.Duplicate(bp.Child("name"), b.Name))
		}
		seen.Insert(b.Name)
		switch b.Mode {
		case "", clerumv1alpha1.EgressModeExactHost, clerumv1alpha1.EgressModePublicWeb:
		default:
			errs = append(errs, field.NotSupported(bp.Child("mode"), b.Mode,
				[]clerumv1alpha1.EgressMode{clerumv1alpha1.EgressModeExactHost, clerumv1alpha1.EgressModePublicWeb}))
		}
		switch b.Protocol {
		case "", corev1.ProtocolTCP, corev1.ProtocolUDP:
		default:
			errs = append(errs, field.NotSupported(bp.Child("protocol"), b.Protocol, []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP}))
		}
		if b.Host != "" {
			errs = append(errs, pattern(bp.Child("host"), b.Host, hostname, 253)...)
		}
		if b.CIDR != "" {
			if _, err := netip.ParsePrefix(b.CIDR); err != nil || len(b.CIDR) > 64 {
				errs = append(errs, field.Invalid(bp.Child("cidr"), b.CIDR, "cidr must be a valid CIDR"))
			}
		}
		errs = append(errs, port(bp.Child("port"), b.Port)...)
		if b.Host != "" && b.CIDR != "" {
			errs = append(errs, field.Invalid(bp, b.Name, "host and cidr are mutually exclusive"))
		}
		if b.EffectiveMode() == clerumv1alpha1.EgressModeExactHost && ((b.Host == "" && b.CIDR == "") || b.Port == nil) {
			errs = append(errs, field.Invalid(bp, b.Name, "an exact-host binding needs one of host or cidr, and a port"))
		}
	}
	return errs
}

// Context returns what the API server would refuse in c.
func Context(c *clerumv1alpha1.Context) field.ErrorList {
	p := field.NewPath("spec")
	errs := pattern(p.Child("contextId"), c.Spec.ContextID, dnsLabel, 63)
	errs = append(errs, maxLen(p.Child("description"), c.Spec.Description, 1024)...)
	return append(errs, labelSet(p.Child("mcpServers"), c.Spec.McpServers, 1024)...)
}

// Host returns what the API server would refuse in h.
func Host(h *clerumv1alpha1.Host) field.ErrorList {
	errs := objectName(h.Name)
	if strings.HasPrefix(h.Name, "wfc-") {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), h.Name,
			"may not start with wfc-: a SharedFileSystem's workload holds those names in the host namespace"))
	}
	p := field.NewPath("spec")
	errs = append(errs, required(p.Child("contextRef"), h.Spec.ContextRef, 253)...)
	if h.Spec.SecretRef != nil {
		errs = append(errs, required(p.Child("secretRef", "name"), h.Spec.SecretRef.Name, 253)...)
	}
	return errs
}

// SharedFileSystem returns what the API server would refuse in s.
func SharedFileSystem(s *clerumv1alpha1.SharedFileSystem) field.ErrorList {
	errs := objectName(s.Name)
	p := field.NewPath("spec")
	errs = append(errs, maxLen(p.Child("description"), s.Spec.Description, 1024)...)
	if s.Spec.StorageClassName != nil {
		errs = append(errs, maxLen(p.Child("storageClassName"), *s.Spec.StorageClassName, 253)...)
	}
	errs = append(errs, labelSet(p.Child("hostRefs"), s.Spec.HostRefs, 256)...)
	if len(s.Spec.Directories) > 64 {
		errs = append(errs, field.TooMany(p.Child("directories"), len(s.Spec.Directories), 64))
	}
	for i, d := range s.Spec.Directories {
		errs = append(errs, pattern(p.Child("directories").Index(i), d, relativePath, 256)...)
	}
	return errs
}

// GlobalFileSystem returns what the API server would refuse in g.
func GlobalFileSystem(g *clerumv1alpha1.GlobalFileSystem) field.ErrorList {
	errs := objectName(g.Name)
	p := field.NewPath("spec")
	errs = append(errs, maxLen(p.Child("description"), g.Spec.Description, 1024)...)
	if g.Spec.DriveName != "" {
		errs = append(errs, pattern(p.Child("driveName"), g.Spec.DriveName, dnsLabel, 63)...)
	}
	return errs
}

// objectName enforces the DNS-label names of the kinds whose name becomes
// other objects' names.
func objectName(name string) field.ErrorList {
	if msgs := k8svalidation.IsDNS1123Label(name); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), name, "metadata.name must be a DNS label")}
	}
	return nil
}

func labelSet(p *field.Path, items []string, max int) field.ErrorList {
	var errs field.ErrorList
	if len(items) > max {
		errs = append(errs, field.TooMany(p, len(items), max))
	}
	seen := sets.New[string]()
	for i, item := range items {
		errs = append(errs, pattern(p.Index(i), item, dnsLabel, 63)...)
		if seen.Has(item) {
			errs = append(errs, field.Duplicate(p.Index(i), item))
		}
		seen.Insert(item)
	}
	return errs
}

func port(p *field.Path, v *int32) field.ErrorList {
	if v != nil && (*v < 1 || *v > 65535) {
		return field.ErrorList{field.Invalid(p, *v, "must be between 1 and 65535")}
	}
	return nil
}

func required(p *field.Path, v string, max int) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	return maxLen(p, v, max)
}

func maxLen(p *field.Path, v string, max int) field.ErrorList {
	if len(v) > max {
		return field.ErrorList{field.TooLong(p, v, max)}
	}
	return nil
}

func pattern(p *field.Path, v string, re *regexp.Regexp, max int) field.ErrorList {
	if errs := required(p, v, max); len(errs) > 0 {
		return errs
	}
	if !re.MatchString(v) {
		return field.ErrorList{field.Invalid(p, v, "must match "+re.String())}
	}
	return nil
}
