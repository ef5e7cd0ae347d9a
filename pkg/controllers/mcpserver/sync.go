package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/mcpserver/resources"
	"github.com/clerum/hcc/pkg/imagepolicy"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
)

// refusedRetry is how soon a server whose child name an object HCC does not
// own holds is looked at again: the holder may be removed by hand, and no
// event of HCC's informers (which watch managed objects) would say so.
const refusedRetry = 5 * time.Minute

// syncMcpServer brings one server's children and status up to date
// (docs/mcpserver.md):
//
//  1. a server that is gone has its children deleted (the garbage
//     collector is the second line); until the egress gates settle, a
//     server whose gate is still closed is left for later;
//  2. its Secrets are validated, its image judged, its spec built and its
//     egress gate read; any of them can block it;
//  3. a blocked server's children are left as they are — nothing is
//     created or rolled, running pods keep running — and it says why,
//     except where what blocks it must not run: a disabled server, an
//     image enforce mode refuses and a Secret no server may read scale
//     the Deployment to zero with its template kept (lifting the block is
//     a scale-up, not a rollout), and a reserved name deletes the
//     children (the name cannot change);
//  4. otherwise the ConfigMap (remote servers), Deployment and Service are
//     written where they differ from the builders;
//  5. a remote server is checked against its egress bindings, and the
//     fields of its spec its proxy ignores are reported (FieldsIgnored);
//  6. status is applied by server-side apply when it changed.
func (c *Controller) syncMcpServer(ctx context.Context, key cache.ObjectName) (kit.Result, error) {
	s, err := c.servers.McpServers(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) || (err == nil && s.DeletionTimestamp != nil) {
		// Gone, or going (a finalizer of someone else's holds it): its
		// children go, and none is re-created.
		c.forget(key.Name)
		c.refreshGauges()
		return kit.Result{}, c.deleteChildren(ctx, key)
	}
	if err != nil {
		return kit.Result{}, err
	}
	if !c.judged(s) {
		// The first NetworkPolicy pass has not released it yet: its
		// closed gate says nothing, so nothing is written. The pass's
		// release or the gates settling queues it again.
		return kit.Result{}, nil
	}

	st := newStatus(s)
	secrets, err := c.checkSecrets(s)
	if err != nil {
		return kit.Result{}, err
	}
	st.secrets(secrets)
	image := c.judgeImage(s)
	st.image(image, c.cfg.Enforce)

	built, buildErr := resources.Build(s, c.cfg.Build, secrets.Digest)
	if buildErr != nil {
		st.invalid(buildErr)
	}
	block := resources.BlockReason(s, secrets, c.refused(), buildErr, func() bool { return c.gate.Ready(s) })
	c.reportBlock(s, block, st)

	var result kit.Result
	if errors.Is(buildErr, resources.ErrReservedName) {
		// Its pods would be selected as a platform workload's; the name is
		// immutable, so nothing of the server can ever be restored.
		if err := c.deleteChildren(ctx, cache.ObjectName{Namespace: s.Namespace, Name: s.Name}); err != nil {
			return kit.Result{}, err
		}
		st.blocked(block)
	} else if block != "" && !s.Spec.IsEnabled() {
		// A disabled server runs nothing whatever else is wrong with it: a
		// block must not keep a running Deployment at its old scale.
		if err := c.scaleToZero(ctx, s); err != nil {
			return kit.Result{}, err
		}
		st.disabled()
	} else if block != "" && resources.Stops(s, secrets, c.refused()) {
		// Enforce mode refuses the image, or a Secret it names is one no
		// server may read: pods started before (in audit mode, under an
		// older allowlist, before the Secret rule) stop. The template is
		// kept, so lifting the block scales the same pods back up.
		if err := c.scaleToZero(ctx, s); err != nil {
			return kit.Result{}, err
		}
		st.blocked(block)
		st.ready.Message += "; the Deployment is scaled to zero"
	} else if block == "" {
		live, refused, err := c.ensureChildren(ctx, s, built)
		if err != nil {
			return kit.Result{}, err
		}
		if refused != nil {
			st.notOwned(refused)
			result.RequeueAfter = refusedRetry
		} else {
			st.deployed(s, live)
		}
	} else {
		st.blocked(block)
	}
	if s.Spec.Remote != nil {
		c.checkRemote(s, st)
		c.reportIgnoredFields(s)
	}
	c.states.Set(s.Name, st.stateOf())
	c.refreshGauges()
	return result, c.applyStatus(ctx, s, st)
}

// judged reports whether the egress gate says anything of s yet: the gates
// have settled, or the first NetworkPolicy pass released s as its policies
// landed (Gate.Settled).
func (c *Controller) judged(s *clerumv1alpha1.McpServer) bool {
	select {
	case <-c.gate.Settled():
		return true
	default:
		return c.gate.Ready(s)
	}
}

// refused is the enforce-mode refusal of the controller's allowlist, nil in
// audit mode.
func (c *Controller) refused() func(*clerumv1alpha1.McpServer) bool {
	return imagepolicy.Enforced(c.cfg.Images, c.cfg.Enforce)
}

// ensureChildren writes the children that differ from the builders: the
// proxy ConfigMap first (the pods mount it), then the Deployment, then the
// Service. A child whose name an object HCC does not own holds is refused
// (kit.Ensure reports it); the others are still written.
func (c *Controller) ensureChildren(ctx context.Context, s *clerumv1alpha1.McpServer, b resources.Children) (*appsv1.Deployment, error, error) {
	owner := kit.Owner{Object: s, GVK: resources.GVK, IdentityLabel: names.LabelMcpServer}
	// Each child is written only once the one before it is HCC's: pods must
	// never mount a proxy configuration someone else wrote, and a Service
	// must never front pods HCC did not judge.
	refusedOrErr := func(err error) (*appsv1.Deployment, error, error) {
		if errors.Is(err, kit.ErrNotOwned) || errors.Is(err, kit.ErrChangeRefused) {
			return nil, err, nil
		}
		return nil, nil, err
	}
	cmName := names.McpServerProxyConfig(s.Name)
	liveCM, _ := c.configMaps.ConfigMaps(s.Namespace).Get(cmName)
	switch {
	case b.ConfigMap != nil:
		if _, _, err := kit.Ensure(ctx, c.children, kit.ConfigMaps, owner, liveCM, b.ConfigMap); err != nil {
			return refusedOrErr(err)
		}
	case liveCM != nil:
		// No longer remote: its proxy configuration goes, if it is its.
		if _, err := kit.DeleteChild(ctx, c.children, kit.ConfigMaps, resources.GVK, s.Name, names.LabelMcpServer, liveCM); err != nil {
			return nil, nil, err
		}
	}
	deployment, _, err := kit.Ensure(ctx, c.children, kit.Deployments, owner, c.deploymentOf(s), b.Deployment)
	if err != nil {
		return refusedOrErr(err)
	}
	liveService, _ := c.services.Services(s.Namespace).Get(b.Service.Name)
	if _, _, err := kit.Ensure(ctx, c.children, kit.Services, owner, liveService, b.Service); err != nil {
		_, refused, err := refusedOrErr(err)
		return deployment, refused, err
	}
	return deployment, nil, nil
}

// scaleToZero scales a disabled server's running Deployment to zero,
// keeping its template: a server that is blocked too (its Secret gone, its
// image refused) cannot be rebuilt, but must still stop.
func (c *Controller) scaleToZero(ctx context.Context, s *clerumv1alpha1.McpServer) error {
	live := c.deploymentOf(s)
	if live == nil || ptr.Deref(live.Spec.Replicas, 1) == 0 {
		return nil
	}
	desired := live.DeepCopy()
	desired.Spec.Replicas = ptr.To[int32](0)
	owner := kit.Owner{Object: s, GVK: resources.GVK, IdentityLabel: names.LabelMcpServer}
	_, _, err := kit.Ensure(ctx, c.children, kit.Deployments, owner, live, desired)
	if errors.Is(err, kit.ErrNotOwned) {
		return nil // reported by Ensure; never written
	}
	return err
}

// deleteChildren deletes the children of a server that is gone, if they
// are its: the Deployment, the Service and the proxy ConfigMap.
func (c *Controller) deleteChildren(ctx context.Context, key cache.ObjectName) error {
	name := names.McpServerWorkload(key.Name)
	var errs []error
	if d, err := c.deployments.Deployments(key.Namespace).Get(name); err == nil {
		_, err := kit.DeleteChild(ctx, c.children, kit.Deployments, resources.GVK, key.Name, names.LabelMcpServer, d)
		errs = append(errs, err)
	}
	if svc, err := c.services.Services(key.Namespace).Get(name); err == nil {
		_, err := kit.DeleteChild(ctx, c.children, kit.Services, resources.GVK, key.Name, names.LabelMcpServer, svc)
		errs = append(errs, err)
	}
	if cm, err := c.configMaps.ConfigMaps(key.Namespace).Get(names.McpServerProxyConfig(key.Name)); err == nil {
		_, err := kit.DeleteChild(ctx, c.children, kit.ConfigMaps, resources.GVK, key.Name, names.LabelMcpServer, cm)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// judgeImage is the allowlist's verdict on s's image.
func (c *Controller) judgeImage(s *clerumv1alpha1.McpServer) resources.ImageVerdict {
	return resources.JudgeImage(c.cfg.Images, s)
}

// checkRemote reports whether one of a remote server's own egress bindings
// covers the host and port of its URL; without one its proxy cannot reach
// the upstream. It deploys either way: the egress policy, not this check,
// is what allows the traffic.
func (c *Controller) checkRemote(s *clerumv1alpha1.McpServer, st *status) {
	host, port, err := resources.RemoteHost(s)
	if err != nil {
		return // reported as InvalidSpec
	}
	covered := false
	for i := range s.Spec.EgressBindings {
		if bindingCovers(&s.Spec.EgressBindings[i], host, port) {
			covered = true
			break
		}
	}
	st.remote(covered, host, port)
	// Both warnings are given once per generation, not on every resync.
	insecure := strings.HasPrefix(strings.ToLower(s.Spec.Remote.URL), "http:")
	if (covered && !insecure) || !c.warned.due(s.Name, s.Generation) {
		return
	}
	if !covered {
		c.recorder.Eventf(s, corev1.EventTypeWarning, reasons.EventRemoteUnreachable,
			"no egress binding of this server covers %s:%d: its proxy cannot reach the upstream", host, port)
	}
	if insecure {
		log := c.base.LogFor(cache.MetaObjectToName(s))
		log.Warn().Str("host", host).
			Msg("remote server reached over plain http: its traffic and credentials cross the network unencrypted")
		c.recorder.Eventf(s, corev1.EventTypeWarning, reasons.EventRemoteInsecure,
			"spec.remote.url is plain http: traffic to %s:%d, credentials included, is not encrypted", host, port)
	}
}

// reportIgnoredFields gives one Normal event per generation of a remote
// server that sets fields its egress proxy does not use (they are reported
// in FieldsIgnored, not refused). A server whose status already says so for
// this generation gets none, so a restarted controller does not repeat it;
// the memory covers the syncs before that status reaches the cache.
func (c *Controller) reportIgnoredFields(s *clerumv1alpha1.McpServer) {
	msg := resources.IgnoredMessage(s)
	if msg == "" {
		return
	}
	if cur := meta.FindStatusCondition(s.Status.Conditions, clerumv1alpha1.ConditionFieldsIgnored); cur != nil &&
		cur.Status == metav1.ConditionTrue && cur.ObservedGeneration == s.Generation {
		return
	}
	if !c.noted.due(s.Name, s.Generation) {
		return
	}
	c.recorder.Event(s, corev1.EventTypeNormal, reasons.EventFieldsIgnored, msg)
}

// bindingCovers reports whether b lets the proxy reach host:port.
func bindingCovers(b *clerumv1alpha1.EgressBinding, host string, port int32) bool {
	if b.EffectiveMode() == clerumv1alpha1.EgressModePublicWeb {
		return port == 80 || port == 443
	}
	if b.Port == nil || *b.Port != port || b.EffectiveProtocol() != string(corev1.ProtocolTCP) {
		return false
	}
	if b.Host != "" {
		return strings.EqualFold(strings.TrimSuffix(b.Host, "."), host)
	}
	addr, err := netip.ParseAddr(host)
	prefix, perr := netip.ParsePrefix(b.CIDR)
	return err == nil && perr == nil && prefix.Contains(addr)
}

// reportBlock emits one event when a server becomes blocked (or blocked for
// another reason) and one when it is released, and keeps the gauges.
func (c *Controller) reportBlock(s *clerumv1alpha1.McpServer, block string, st *status) {
	was := c.blocked.Set(s.Name, block)
	if was == block {
		return
	}
	log := c.base.LogFor(cache.MetaObjectToName(s))
	switch {
	case block != "":
		log.Info().Str("reason", block).Msg("server blocked")
		c.recorder.Eventf(s, corev1.EventTypeWarning, reasons.EventBlocked, "%s: %s", block, st.blockMessage(block))
	case was != "":
		log.Info().Str("was", was).Msg("server released")
		c.recorder.Event(s, corev1.EventTypeNormal, reasons.EventReleased, fmt.Sprintf("no longer blocked (%s)", was))
	}
}

// applyStatus writes the fields hcc-mcpserver owns when they changed.
func (c *Controller) applyStatus(ctx context.Context, s *clerumv1alpha1.McpServer, st *status) error {
	apply, changed := st.build(c.clock.Now())
	if !changed {
		return nil
	}
	return kit.ApplyStatus(c.statusWrites, s, apply, func() (metav1.Object, error) {
		return c.hcc.ClerumV1alpha1().McpServers(s.Namespace).ApplyStatus(ctx, apply,
			metav1.ApplyOptions{FieldManager: clerumv1alpha1.FieldManagerMcpServer, Force: true})
	})
}
