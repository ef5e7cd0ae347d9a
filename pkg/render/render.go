// Package render is `hcc-controller render`: the offline plan. From YAML
// files it computes every object the controller would create in an empty
// cluster holding those objects, with the controller's own validation,
// gating and planning code, and contacts no cluster.
package render

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/controllers/egress/resolve"
	gfsresources "github.com/clerum/hcc/pkg/controllers/globalfs/resources"
	hostresources "github.com/clerum/hcc/pkg/controllers/host/resources"
	mcpserverresources "github.com/clerum/hcc/pkg/controllers/mcpserver/resources"
	"github.com/clerum/hcc/pkg/controllers/netpol/planopts"
	sfsresources "github.com/clerum/hcc/pkg/controllers/sharedfs/resources"
	"github.com/clerum/hcc/pkg/imagepolicy"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/netpol"
	"github.com/clerum/hcc/pkg/reasons"
	"github.com/clerum/hcc/pkg/secretdigest"
	"github.com/clerum/hcc/pkg/validation"
)

// Options configures one render.
type Options struct {
	// Paths are files or folders of YAML.
	Paths []string
	// Overrides answer lookups of the named hosts (--resolve); other hosts
	// go to Resolver.
	Overrides map[string][]netip.Addr
	Resolver  resolve.Resolver
	Config    *config.Config
	// Warn receives notes and warnings, one line each (stderr).
	Warn func(format string, args ...any)
}

// Render returns the multi-document YAML stream of the planned objects,
// sorted by apiVersion, kind, namespace and name. An error is bad input.
func Render(ctx context.Context, opts Options) ([]byte, error) {
	cfg := opts.Config
	l := &loader{defaultNamespace: defaultNamespaces(cfg), note: opts.Warn}
	in, err := l.load(opts.Paths)
	if err != nil {
		return nil, err
	}
	if err := validateInputs(in); err != nil {
		return nil, err
	}

	servers := watched(in.servers, cfg.Namespaces.McpServer, opts.Warn)
	contexts := watched(in.contexts, cfg.Namespaces.McpServer, opts.Warn)
	resolver := overrideResolver{overrides: opts.Overrides, fallback: opts.Resolver}
	warnings := map[string]string{} // server/binding → warning, first reason wins
	resolved := map[string]map[string]netpol.Resolution{}
	planOpts := planopts.FromConfig(cfg)
	rules := netpol.NewEgressRules(planOpts)
	gated := map[string]bool{} // servers whose egress gate would stay closed
	for _, s := range servers {
		// As the egress coordinator: a server that may hold no egress
		// (disabled, or an image enforce mode refuses) is not resolved.
		if !planOpts.ServerActive(s) || len(s.Spec.EgressBindings) == 0 {
			continue
		}
		answer := resolve.Resolve(ctx, resolver, cfg.McpServer.ExternalEgressDNSTimeout, rules, s)
		if len(answer.Rejected)+len(answer.Failed) > 0 {
			gated[s.Name] = true
		}
		for b, reason := range answer.Rejected {
			warnings[s.Name+"/"+b] = fmt.Sprintf("McpServer %s binding %s rejected: %s", s.Name, b, reason)
		}
		for b, class := range answer.Failed {
			warnings[s.Name+"/"+b] = fmt.Sprintf("McpServer %s binding %s not resolved (%s: %s): no allow, and the server's runtime stays blocked",
				s.Name, b, class, answer.Details[b])
		}
		for i := range s.Spec.EgressBindings {
			b := &s.Spec.EgressBindings[i]
			if addrs, ok := answer.Addrs[b.Name]; ok {
				if resolved[s.Name] == nil {
					resolved[s.Name] = map[string]netpol.Resolution{}
				}
				resolved[s.Name][b.Name] = netpol.ResolutionFor(s, b, addrs)
			}
		}
	}

	plan := netpol.Compute(netpol.Inventory{Contexts: contexts, Servers: servers, Resolved: resolved}, planOpts)
	for _, r := range plan.Rejections {
		if r.Kind == netpol.RejectedEgressBinding {
			gated[r.Server] = true
		}
		key := r.Server + "/" + r.Binding
		if _, ok := warnings[key]; !ok {
			warnings[key] = fmt.Sprintf("McpServer %s binding %s rejected: %s", r.Server, r.Binding, r.Reason)
		}
	}
	for _, c := range plan.Conflicts {
		opts.Warn("Context %s ignored: contextId %s is held by Context %s", c.Context, c.ContextID, c.HeldBy)
	}
	for _, key := range sortedKeys(warnings) {
		opts.Warn("%s", warnings[key])
	}

	objects := make([]runtime.Object, 0, len(plan.Policies))
	for _, p := range plan.Policies {
		objects = append(objects, p)
	}
	warnUnread(in, cfg, opts.Warn)
	workloads, err := planServers(servers, inNamespace(in.secrets, cfg.Namespaces.McpServer), gated, cfg, opts.Warn)
	if err != nil {
		return nil, err
	}
	objects = append(objects, workloads...)
	hosts, err := planHosts(watched(in.hosts, cfg.Namespaces.Host, opts.Warn), contexts,
		inNamespace(in.secrets, cfg.Namespaces.Host), inNamespace(in.configMaps, cfg.Namespaces.Host), cfg, opts.Warn)
	if err != nil {
		return nil, err
	}
	objects = append(objects, hosts...)
	objects = append(objects, planFileSystems(in, cfg, opts.Warn)...)
	return encode(objects)
}

// planFileSystems plans each SharedFileSystem's and GlobalFileSystem's
// runtime with its reconciler's own admission: one whose ConfigMap or
// Secret is missing or invalid gets none, with a warning. A
// SharedFileSystem whose spec.size is above HCC_SFS_MAX_SIZE gets no claim
// and no WFC (its policies and Service are written, as by the
// reconciler); a GlobalFileSystem whose drive an older one holds gets
// nothing (docs/globalfilesystem.md, "One writer per drive").
func planFileSystems(in *inputs, cfg *config.Config, warn func(string, ...any)) []runtime.Object {
	var out []runtime.Object
	byName := func(objs []*corev1.ConfigMap, ns string) map[string]*corev1.ConfigMap {
		m := map[string]*corev1.ConfigMap{}
		for _, o := range inNamespace(objs, ns) {
			m[o.Name] = o
		}
		return m
	}
	sfsOpts := sfsresources.OptionsFrom(cfg)
	hostMaps := byName(in.configMaps, cfg.Namespaces.Host)
	for _, fs := range watched(in.sfs, cfg.Namespaces.Host, warn) {
		a := sfsresources.Admit(func(name string) *corev1.ConfigMap { return hostMaps[name] }, sfsOpts)
		if a.Block != "" {
			warn("SharedFileSystem %s gets no runtime (%s): %s", fs.Name, a.Block, a.Message)
			continue
		}
		children := sfsresources.Plan(fs, a, sfsOpts)
		if err := sfsresources.CheckSize(fs, sfsOpts); err != nil {
			// The reconciler never asks the cluster for the claim, and the
			// WFC waits for its claim.
			warn("SharedFileSystem %s gets no claim and no Deployment (%s): %v", fs.Name, reasons.InvalidSpec, err)
			children = without(children, func(o runtime.Object) bool {
				switch o.(type) {
				case *corev1.PersistentVolumeClaim, *appsv1.Deployment:
					return true
				}
				return false
			})
		}
		out = append(out, children...)
	}
	gfsOpts := gfsresources.OptionsFrom(cfg)
	gfsMaps := byName(in.configMaps, cfg.Namespaces.GFS)
	var secret *corev1.Secret
	for _, s := range inNamespace(in.secrets, cfg.Namespaces.GFS) {
		if s.Name == gfsOpts.PostgresSecret {
			// The init container's wait target, from the raw value as the
			// reconciler reads it from the API server; then the value is
			// digested, as the reconciler's cache holds it.
			gfsOpts.WaitHost, gfsOpts.WaitPort = gfsresources.PostgresWaitTarget(string(s.Data[gfsOpts.PostgresSecretKey]))
			d, _ := secretdigest.Digest(s)
			secret = d.(*corev1.Secret)
		}
	}
	filesystems := watched(in.gfs, cfg.Namespaces.GFS, warn)
	for _, g := range filesystems {
		// The drive conflict first, as in the reconciler: it stops the
		// writer whatever the configuration says.
		if held := gfsresources.DriveHeld(g, filesystems, gfsOpts); held != "" {
			warn("GlobalFileSystem %s gets no runtime (%s): %s", g.Name, gfsresources.ReasonDriveConflict, held)
			continue
		}
		a := gfsresources.Admit(secret, gfsMaps[gfsOpts.JWTConfigMap], gfsOpts)
		if a.Block != "" {
			warn("GlobalFileSystem %s gets no runtime (%s): %s", g.Name, a.Block, a.Message)
			continue
		}
		out = append(out, gfsresources.Plan(g, a, gfsOpts)...)
	}
	return out
}

// without returns objs less those drop reports.
func without(objs []runtime.Object, drop func(runtime.Object) bool) []runtime.Object {
	var out []runtime.Object
	for _, o := range objs {
		if !drop(o) {
			out = append(out, o)
		}
	}
	return out
}

// planHosts plans each Host's objects with the Host operator's own
// admission: a Host whose Context is missing or does not hold its
// contextId, or whose spec.secretRef is missing, gets none, with a warning;
// one whose namespace lacks the ConfigMap every mcp-host container loads
// (CONTEXT_MAPPER_HOST_CONFIGMAP_NAME) gets every object but its
// Deployment, with a warning.
func planHosts(hosts []*clerumv1alpha1.Host, contexts []*clerumv1alpha1.Context, secrets []*corev1.Secret,
	configMaps []*corev1.ConfigMap, cfg *config.Config, warn func(string, ...any)) ([]runtime.Object, error) {
	opts := hostresources.OptionsFrom(cfg)
	byName := map[string]*clerumv1alpha1.Context{}
	byID := map[string][]*clerumv1alpha1.Context{}
	for _, c := range contexts {
		byName[c.Name] = c
		byID[c.Spec.ContextID] = append(byID[c.Spec.ContextID], c)
	}
	secretsByName := map[string]*corev1.Secret{}
	for _, s := range secrets {
		secretsByName[s.Name] = s
	}
	var out []runtime.Object
	for _, h := range hosts {
		ctx := byName[h.Spec.ContextRef]
		var sameID []*clerumv1alpha1.Context
		if ctx != nil {
			sameID = byID[ctx.Spec.ContextID]
		}
		a := hostresources.Admit(h, ctx, sameID, func(name string) *corev1.Secret { return secretsByName[name] }, cfg.Namespaces.McpServer, opts)
		if a.Block != "" {
			msg := a.ContextMessage
			if a.SecretsChecked {
				msg = a.SecretsMessage
			}
			warn("Host %s gets no objects (%s): %s", h.Name, a.Block, msg)
			continue
		}
		children, err := hostresources.Plan(h, a, opts)
		if err != nil {
			return nil, fmt.Errorf("planning host %s: %w", h.Name, err)
		}
		if missing := configMissing(opts, configMaps); missing != "" {
			// As the reconciler: every other object is written, and the
			// Deployment waits for the ConfigMap.
			warn("Host %s gets no Deployment (%s): %s", h.Name, reasons.ConfigMissing, missing)
			children = without(children, func(o runtime.Object) bool {
				d, ok := o.(*appsv1.Deployment)
				return ok && d.Namespace == h.Namespace && d.Name == names.HostWorkload(h.Name)
			})
		}
		out = append(out, children...)
	}
	return out, nil
}

// configMissing returns why no Host Deployment is written for want of the
// ConfigMap every mcp-host container loads, or "" when it is among
// configMaps (the host namespace's) or none is configured. The platform
// ships it (deploy/base/mcp-host); render sees it only when given it.
func configMissing(opts hostresources.Options, configMaps []*corev1.ConfigMap) string {
	if opts.ConfigMapName == "" {
		return ""
	}
	for _, c := range configMaps {
		if c.Name == opts.ConfigMapName {
			return ""
		}
	}
	return fmt.Sprintf("ConfigMap %s does not exist in %s: the mcp-host container loads it whole (its trust anchors and proxy); "+
		"deploy/base/mcp-host ships it, pass it with -f", opts.ConfigMapName, opts.HostNamespace)
}

// planServers plans each McpServer's children with the McpServer operator's
// own decision: a server whose Secrets, image (enforce mode), spec or egress
// would block it gets none, with a warning. Secret values are digested on
// the way in, as the controller's cache holds them.
func planServers(servers []*clerumv1alpha1.McpServer, secrets []*corev1.Secret, gated map[string]bool,
	cfg *config.Config, warn func(string, ...any)) ([]runtime.Object, error) {
	images, err := imagepolicy.Parse(cfg.ImagePolicy.AllowedPrefixes)
	if err != nil {
		return nil, fmt.Errorf("CONTEXT_MAPPER_ALLOWED_IMAGE_PREFIXES: %w", err)
	}
	byName := map[string]*corev1.Secret{}
	for _, s := range secrets {
		d, _ := secretdigest.Digest(s)
		byName[s.Name] = d.(*corev1.Secret)
	}
	lookup := func(name string) (*corev1.Secret, error) {
		if s, ok := byName[name]; ok {
			return s, nil
		}
		return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
	}
	opts := mcpserverresources.Options{
		PullPolicy:           cfg.McpServer.ImagePullPolicy,
		StdioBridgeImage:     cfg.McpServer.StdioBridgeImage,
		StdioBridgeResources: cfg.McpServer.StdioBridgeResources,
		EgressProxyImage:     cfg.McpServer.EgressProxyImage,
	}
	var out []runtime.Object
	for _, s := range servers {
		children, block, why, err := mcpserverresources.Plan(s, opts, images, cfg.ImagePolicy.Enforce, lookup, !gated[s.Name])
		if err != nil {
			return nil, err
		}
		if msg := mcpserverresources.IgnoredMessage(s); msg != "" {
			warn("McpServer %s: %s", s.Name, msg)
		}
		if block != "" {
			warn("McpServer %s gets no Deployment (%s): %s", s.Name, block, why)
			continue
		}
		out = append(out, children...)
	}
	return out, nil
}

// validateInputs refuses objects the API server would refuse.
func validateInputs(in *inputs) error {
	check := func(kind, ns, name string, errs field.ErrorList) error {
		if len(errs) == 0 {
			return nil
		}
		return fmt.Errorf("invalid %s %s/%s: %v", kind, ns, name, errs.ToAggregate())
	}
	for _, o := range in.servers {
		if err := check("McpServer", o.Namespace, o.Name, validation.McpServer(o)); err != nil {
			return err
		}
	}
	for _, o := range in.contexts {
		if err := check("Context", o.Namespace, o.Name, validation.Context(o)); err != nil {
			return err
		}
	}
	for _, o := range in.hosts {
		if err := check("Host", o.Namespace, o.Name, validation.Host(o)); err != nil {
			return err
		}
	}
	for _, o := range in.sfs {
		if err := check("SharedFileSystem", o.Namespace, o.Name, validation.SharedFileSystem(o)); err != nil {
			return err
		}
	}
	for _, o := range in.gfs {
		if err := check("GlobalFileSystem", o.Namespace, o.Name, validation.GlobalFileSystem(o)); err != nil {
			return err
		}
	}
	return nil
}

// defaultNamespaces places an object without a namespace where HCC watches
// its kind; Secrets and ConfigMaps go to the MCP server namespace.
func defaultNamespaces(cfg *config.Config) func(kind string) string {
	return func(kind string) string {
		switch kind {
		case "Host", "SharedFileSystem":
			return cfg.Namespaces.Host
		case "GlobalFileSystem":
			return cfg.Namespaces.GFS
		default:
			return cfg.Namespaces.McpServer
		}
	}
}

// watched keeps the objects in namespace; the controller never sees others.
func watched[T interface {
	GetNamespace() string
	GetName() string
}](objs []T, namespace string, warn func(string, ...any)) []T {
	var out []T
	for _, o := range objs {
		if o.GetNamespace() != namespace {
			warn("ignoring %s/%s: HCC watches namespace %s", o.GetNamespace(), o.GetName(), namespace)
			continue
		}
		out = append(out, o)
	}
	return out
}

// inNamespace returns the objects of objs in namespace.
func inNamespace[T interface{ GetNamespace() string }](objs []T, namespace string) []T {
	var out []T
	for _, o := range objs {
		if o.GetNamespace() == namespace {
			out = append(out, o)
		}
	}
	return out
}

// warnUnread warns about each Secret and ConfigMap in a namespace no
// reconciler reads them from: the MCP server, host and GFS namespaces.
func warnUnread(in *inputs, cfg *config.Config, warn func(string, ...any)) {
	read := map[string]bool{cfg.Namespaces.McpServer: true, cfg.Namespaces.Host: true, cfg.Namespaces.GFS: true}
	for _, s := range in.secrets {
		if !read[s.Namespace] {
			warn("ignoring Secret %s/%s: no reconciler reads Secrets in that namespace", s.Namespace, s.Name)
		}
	}
	for _, c := range in.configMaps {
		if !read[c.Namespace] {
			warn("ignoring ConfigMap %s/%s: no reconciler reads ConfigMaps in that namespace", c.Namespace, c.Name)
		}
	}
}

// overrideResolver answers --resolve hosts itself and asks fallback for the
// rest.
type overrideResolver struct {
	overrides map[string][]netip.Addr
	fallback  resolve.Resolver
}

var _ resolve.Resolver = overrideResolver{}

func (r overrideResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if addrs, ok := r.overrides[strings.ToLower(strings.TrimSuffix(host, "."))]; ok {
		return addrs, nil
	}
	return r.fallback.LookupNetIP(ctx, network, host)
}

// ParseResolve parses one --resolve value, HOST=IP[,IP], into overrides.
func ParseResolve(value string, overrides map[string][]netip.Addr) error {
	host, ips, ok := strings.Cut(value, "=")
	host = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(host), "."))
	if !ok || host == "" || ips == "" {
		return fmt.Errorf("--resolve %q: want HOST=IP[,IP]", value)
	}
	for _, s := range strings.Split(ips, ",") {
		addr, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("--resolve %q: %w", value, err)
		}
		overrides[host] = append(overrides[host], addr)
	}
	return nil
}

// encode writes objects as one multi-document YAML stream sorted by
// apiVersion, kind, namespace and name, without the status and null
// creationTimestamp Go's types would add.
func encode(objects []runtime.Object) ([]byte, error) {
	type entry struct {
		sortKey string
		doc     []byte
	}
	entries := make([]entry, 0, len(objects))
	for _, obj := range objects {
		raw, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		meta, _ := m["metadata"].(map[string]any)
		delete(meta, "creationTimestamp")
		// A plan is desired objects: status is never part of it.
		delete(m, "status")
		doc, err := yaml.Marshal(m)
		if err != nil {
			return nil, err
		}
		gvk := obj.GetObjectKind().GroupVersionKind()
		ns, _ := meta["namespace"].(string)
		name, _ := meta["name"].(string)
		entries = append(entries, entry{
			sortKey: strings.Join([]string{gvk.GroupVersion().String(), gvk.Kind, ns, name}, "\x00"),
			doc:     doc,
		})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].sortKey < entries[j].sortKey })
	var out bytes.Buffer
	for _, e := range entries {
		out.WriteString("---\n")
		out.Write(e.doc)
	}
	return out.Bytes(), nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
