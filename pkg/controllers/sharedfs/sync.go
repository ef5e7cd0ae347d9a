package sharedfs

import (
	"context"
	"errors"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/sharedfs/resources"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
)

// syncSharedFileSystem brings one SharedFileSystem's children and status
// up to date (docs/sharedfilesystem.md):
//
//  1. a file system that is gone, or going, and whose deletion this process
//     observed has its children deleted, the data claim included;
//  2. otherwise the JWT public key is validated (Admit); a file system that
//     fails it has nothing created or rolled — only an existing ingress
//     policy is kept in step with spec.hostRefs, so a revoked Host loses
//     access whatever the configuration;
//  3. the claim, the ingress policy and the Service are ensured, each
//     independently of the others' failures; the Deployment only once the
//     claim and the policy are HCC's: the WFC never mounts a volume HCC
//     does not own nor runs without its ingress policy;
//  4. status is applied when it changed.
func (c *Controller) syncSharedFileSystem(ctx context.Context, key cache.ObjectName) (kit.Result, error) {
	fs, err := c.filesystems.SharedFileSystems(key.Namespace).Get(key.Name)
	switch {
	case apierrors.IsNotFound(err):
		return kit.Result{}, c.gone(ctx, key.Name)
	case err != nil:
		return kit.Result{}, err
	case fs.DeletionTimestamp != nil:
		// Going (a foreground deletion waits for its children): observed.
		c.state.deleted.Observe(fs.Name, fs.UID)
		return kit.Result{}, c.gone(ctx, fs.Name)
	}

	opts := c.cfg.Build
	st := newStatus(fs, opts, c.state.wasAvailable(fs))
	a := resources.Admit(c.configMap, opts)
	st.config(a)
	c.reportBlock(fs, a)
	// The one plan of fs's children (render prints the same); what of it
	// is written, and when, is decided below.
	want := resources.MakeChildren(fs, a, opts)
	var errs []error
	var result kit.Result
	if a.Block != "" {
		errs = append(errs, c.revokeHosts(ctx, fs, want))
		st.observe(c.claimOf(fs), c.deploymentOf(fs))
	} else {
		result, errs = c.ensure(ctx, fs, want, st)
	}
	phase := st.phase()
	c.state.setPhase(fs.Name, phase)
	if st.available {
		c.state.markAvailable(fs)
	}
	c.metrics.refresh(c.state)
	errs = append(errs, c.applyStatus(ctx, fs, st))
	return result, errors.Join(errs...)
}

// configMap returns a ConfigMap of the host namespace from the cache, or
// nil.
func (c *Controller) configMap(name string) *corev1.ConfigMap {
	cm, err := c.configMaps.ConfigMaps(c.cfg.Namespace).Get(name)
	if err != nil {
		return nil
	}
	return cm
}

// reportBlock posts one event per block and per release.
func (c *Controller) reportBlock(fs *clerumv1alpha1.SharedFileSystem, a resources.Admission) {
	previous := c.state.block.Set(fs.Name, a.Block)
	log := c.base.LogFor(cache.MetaObjectToName(fs))
	switch {
	case a.Block != "" && a.Block != previous:
		log.Info().Str("reason", a.Block).Msg("shared file system blocked")
		c.recorder.Eventf(fs, corev1.EventTypeWarning, reasons.EventBlocked, "%s: %s; nothing is created or rolled", a.Block, a.Message)
	case a.Block == "" && previous != "":
		log.Info().Str("was", previous).Msg("shared file system released")
		c.recorder.Eventf(fs, corev1.EventTypeNormal, reasons.EventReleased, "no longer blocked (was %s)", previous)
	}
}

func (c *Controller) owner(fs *clerumv1alpha1.SharedFileSystem) kit.Owner {
	return kit.Owner{Object: fs, GVK: gvk, IdentityLabel: names.LabelSharedFileSystem}
}

// ensure writes fs's children, want, and records what they say in st. It
// goes on past a failed or refused child: one bad object does not stop the
// others, except that the Deployment waits for the claim and the policy.
func (c *Controller) ensure(ctx context.Context, fs *clerumv1alpha1.SharedFileSystem, want resources.Children, st *status) (kit.Result, []error) {
	opts, owner := c.cfg.Build, c.owner(fs)
	var errs []error
	var refused []string
	// write records the outcome of one child and reports whether it is
	// HCC's and as usable as the builder means it.
	write := func(err error) bool {
		switch {
		case isOwnership(err):
			var r *kit.RefusedError
			errors.As(err, &r)
			refused = append(refused, r.Error())
			return false
		case err != nil:
			errs = append(errs, err)
			return false
		}
		return true
	}

	// The claim: a change HCC does not make (a shrink, a storage class
	// change) leaves it as it is, reported by the kit, and usable.
	liveClaim := c.claimOf(fs)
	var claim *corev1.PersistentVolumeClaim
	var err error
	var change *kit.RefusedError
	claimOK := true
	tooLarge := resources.CheckSize(fs, opts)
	if tooLarge == nil {
		claim, _, err = kit.Ensure(ctx, c.children, c.claimKind, owner, liveClaim, want.Claim)
	}
	switch {
	case tooLarge != nil:
		// A size above the bound is never asked of the cluster: no claim
		// is created or grown; one that exists is kept as it is, and
		// usable when it is HCC's.
		st.claimSizeRefused(tooLarge, liveClaim)
		claim = liveClaim
		if liveClaim != nil {
			_, _, err = kit.Plan(c.claimKind, owner, liveClaim, liveClaimAsBuilt(want.Claim, liveClaim))
			claimOK = write(err)
			st.claimNotOwned = isOwnership(err)
		} else {
			claimOK = false
		}
	case errors.As(err, &change) && errors.Is(err, kit.ErrChangeRefused):
		st.claimChangeRefused(change, liveClaim)
		claim = liveClaim
	default:
		claimOK = write(err)
		st.claimNotOwned = isOwnership(err)
	}
	policyOK := write(kit.EnsureFrom(ctx, c.children, kit.NetworkPolicies, owner, c.policies.NetworkPolicies(fs.Namespace), want.IngressPolicy))
	errs = append(errs, c.ensureEgress(ctx, fs, want.EgressPolicy))
	write(kit.EnsureFrom(ctx, c.children, kit.Services, owner, c.services.Services(fs.Namespace), want.Service))

	live := c.deploymentOf(fs)
	// Creating the WFC waits for its claim and its ingress policy to be
	// HCC's; a running one is still kept in step (spec.hostRefs in its
	// environment) whatever holds the policy's name.
	if claimOK && (policyOK || live != nil) {
		d, _, err := kit.Ensure(ctx, c.children, kit.Deployments, owner, live, want.Deployment)
		if write(err) {
			live = d
		}
	}

	var result kit.Result
	if len(refused) > 0 {
		slices.Sort(refused)
		st.notOwned(strings.Join(refused, "; "))
		result.RequeueAfter = refusedRetry
	}
	st.deployBlocked = !claimOK || !policyOK
	st.observe(claim, live)
	return result, errs
}

// liveClaimAsBuilt is the desired claim at the live claim's size, so that
// kit.Plan judges whether the live claim is HCC's (labels, references,
// source, volume) without asking it to grow. desired is not modified.
func liveClaimAsBuilt(desired, live *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	c := desired.DeepCopy()
	if have, ok := live.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		c.Spec.Resources.Requests[corev1.ResourceStorage] = have.DeepCopy()
	}
	return c
}

// revokeHosts rewrites fs's existing ingress policy, if it has one of
// HCC's, to spec.hostRefs (want's policies): a Host taken off the list
// loses access even while the file system is blocked. It creates nothing.
func (c *Controller) revokeHosts(ctx context.Context, fs *clerumv1alpha1.SharedFileSystem, want resources.Children) error {
	live, err := c.policies.NetworkPolicies(fs.Namespace).Get(names.WFCIngressPolicy(fs.Name))
	if err != nil {
		return nil
	}
	if _, _, err := kit.Ensure(ctx, c.children, kit.NetworkPolicies, c.owner(fs), live, want.IngressPolicy); err != nil && !isRefused(err) {
		return err
	}
	if _, err := c.policies.NetworkPolicies(fs.Namespace).Get(names.WFCEgressPolicy(fs.Name)); err == nil {
		return c.ensureEgress(ctx, fs, want.EgressPolicy)
	}
	return nil
}

// ensureEgress writes fs's egress policy, desired, or deletes it when
// desired is nil: no Host may reach the WFC. A refusal (a name held by an
// object HCC does not own) is reported by the kit and blocks nothing: the
// ingress half still admits only the Hosts listed.
func (c *Controller) ensureEgress(ctx context.Context, fs *clerumv1alpha1.SharedFileSystem, desired *networkingv1.NetworkPolicy) error {
	live, err := c.policies.NetworkPolicies(fs.Namespace).Get(names.WFCEgressPolicy(fs.Name))
	if err != nil {
		live = nil
	}
	switch {
	case desired != nil:
		if _, _, err := kit.Ensure(ctx, c.children, kit.NetworkPolicies, c.owner(fs), live, desired); err != nil && !isRefused(err) {
			return err
		}
	case live != nil:
		if _, err := kit.DeleteChild(ctx, c.children, kit.NetworkPolicies, gvk, fs.Name, names.LabelSharedFileSystem, live); err != nil {
			return err
		}
	}
	return nil
}

// isRefused reports whether err is a kit refusal of any cause.
func isRefused(err error) bool {
	var r *kit.RefusedError
	return errors.As(err, &r)
}

// isOwnership reports whether err refuses a child for who owns it (not for
// a change it cannot make).
func isOwnership(err error) bool {
	return isRefused(err) && errors.Is(err, kit.ErrNotOwned)
}

// claimOf returns fs's live data claim, or nil.
func (c *Controller) claimOf(fs *clerumv1alpha1.SharedFileSystem) *corev1.PersistentVolumeClaim {
	pvc, err := c.claims.PersistentVolumeClaims(fs.Namespace).Get(names.WFCData(fs.Name))
	if err != nil {
		return nil
	}
	return pvc
}

// deploymentOf returns fs's live WFC Deployment, or nil.
func (c *Controller) deploymentOf(fs *clerumv1alpha1.SharedFileSystem) *appsv1.Deployment {
	d, err := c.deployments.Deployments(fs.Namespace).Get(names.WFCWorkload(fs.Name))
	if err != nil {
		return nil
	}
	return d
}

// gone handles a file system no longer in the cache, or going. If this
// process saw it deleted, its children are deleted — the data claim
// included: its owner's deletion was observed (docs/ownership.md). Otherwise
// nothing is: the garbage collector follows the owner references, and a
// claim is never deleted as an unexplained orphan.
func (c *Controller) gone(ctx context.Context, name string) error {
	c.state.forget(name)
	c.metrics.refresh(c.state)
	if !c.state.deleted.Seen(name) {
		return nil
	}
	leftover := func(o metav1.Object) bool { return c.state.deleted.Leftover(name, o) }
	ns := c.cfg.Namespace
	var remaining int
	var errs []error
	count := func(n int, err error) {
		remaining += n
		errs = append(errs, err)
	}
	count(deleteChild(ctx, c.children, kit.Deployments, c.deployments.Deployments(ns), names.WFCWorkload(name), name, leftover))
	count(deleteChild(ctx, c.children, kit.Services, c.services.Services(ns), names.WFCWorkload(name), name, leftover))
	count(deleteChild(ctx, c.children, kit.NetworkPolicies, c.policies.NetworkPolicies(ns), names.WFCIngressPolicy(name), name, leftover))
	count(deleteChild(ctx, c.children, kit.NetworkPolicies, c.policies.NetworkPolicies(ns), names.WFCEgressPolicy(name), name, leftover))
	count(deleteChild(ctx, c.children, kit.PersistentVolumeClaims, c.claims.PersistentVolumeClaims(ns), names.WFCData(name), name, leftover))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if remaining == 0 {
		c.state.deleted.Settle(name)
	}
	return nil
}

// deleteChild deletes the child of kind named child of the file system
// fsName when the cache shows one that leftover accepts, and returns 1 when
// one is still on its way out (deleted, with a finalizer of its own to
// run). A claim held only by kubernetes.io/pvc-protection counts as gone:
// it goes when its pod does.
func deleteChild[T kit.Child](ctx context.Context, c *kit.Children, kind kit.Kind[T], l kit.Lister[T], child, fsName string,
	leftover func(metav1.Object) bool) (int, error) {
	live, err := l.Get(child)
	if err != nil {
		return 0, nil // gone: the cache is the judge; a NotFound is success
	}
	if !leftover(live) {
		return 0, nil // a later file system's of the same name
	}
	if live.GetDeletionTimestamp() != nil {
		if _, claim := any(live).(*corev1.PersistentVolumeClaim); claim &&
			slices.Equal(live.GetFinalizers(), []string{"kubernetes.io/pvc-protection"}) {
			return 0, nil
		}
		return 1, nil
	}
	_, err = kit.DeleteChild(ctx, c, kind, gvk, fsName, names.LabelSharedFileSystem, live)
	return 0, err
}
