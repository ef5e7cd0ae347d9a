package netpol

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	applymetav1 "k8s.io/client-go/applyconfigurations/meta/v1"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	applyv1alpha1 "github.com/clerum/hcc/pkg/generated/applyconfiguration/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/netpol"
)

// syncFull is one full pass, in the order that keeps the cluster safe at
// every step:
//
//  1. ensure L0/L1 (default deny and infrastructure),
//  2. revoke: delete orphans (unless a cap refuses) and rewrite changed
//     policies,
//  3. certify readiness — from here on no stale allow survives,
//  4. add: create the allows that are new.
//
// A failed write aborts the pass before later phases, so readiness is never
// certified over an unrevoked allow; the queue retries with backoff.
func (c *Controller) syncFull(ctx context.Context) error {
	resolved, version := c.egress.Snapshot()
	inv, err := c.inventory(resolved)
	if err != nil {
		return err
	}
	plan := c.plan(inv, c.opts.Plan)
	live, err := c.livePolicies()
	if err != nil {
		return err
	}
	ch := diff(plan.Policies, live, c.opts.Caps, nil, withheld(inv, c.opts.Plan.McpServerNamespace))
	c.observePlan(plan, ch)

	isDefault := func(p *networkingv1.NetworkPolicy) bool { return defaultTypes[p.Labels[names.LabelPolicyType]] }
	missing := sets.New[string]()
	if err := c.write(ctx, "create", filter(ch.creates, isDefault), missing); err != nil {
		return err
	}
	if err := c.write(ctx, "update", filter(ch.updates, isDefault), missing); err != nil {
		return err
	}
	if err := c.write(ctx, "delete", ch.revokes, missing); err != nil {
		return err
	}
	if err := c.write(ctx, "delete", ch.deletes, missing); err != nil {
		return err
	}
	if err := c.write(ctx, "update", filter(ch.updates, not(isDefault)), missing); err != nil {
		return err
	}
	if !c.certified.Swap(true) {
		c.log.Info().Int("orphans", len(ch.orphans)).Str("capped", ch.capped).
			Msg("stale allows revoked; readiness certified")
		c.metrics.Certified.Set(1)
		c.readiness.Set(ReadinessCheck, true)
	}
	if err := c.write(ctx, "create", filter(ch.creates, not(isDefault)), missing); err != nil {
		return err
	}

	c.egress.Applied(version)
	c.reportRejections(inv.Servers, plan.Rejections)
	if err := c.reportConflicts(ctx, inv.Contexts, plan.Conflicts); err != nil {
		return err
	}
	return missingNamespaces(missing)
}

// missingNamespaces turns the namespaces a pass could not write into into an
// error, so the queue retries the pass with backoff until they exist: HCC
// does not watch namespaces, and a namespace created later must still get
// its default deny. A namespace that does not exist holds no pod to
// protect, so it blocks neither certification nor the egress gates.
func missingNamespaces(missing sets.Set[string]) error {
	if missing.Len() == 0 {
		return nil
	}
	return fmt.Errorf("namespaces %s do not exist; their policies are written once they do", strings.Join(sets.List(missing), ", "))
}

// reportRejections emits one Warning event on the McpServer for each new
// rejected recipe binding or colliding Context allow. Egress binding
// rejections are the external-egress coordinator's to report, with status.
func (c *Controller) reportRejections(servers []*clerumv1alpha1.McpServer, rejections []netpol.Rejection) {
	byName := make(map[string]*clerumv1alpha1.McpServer, len(servers))
	for _, s := range servers {
		byName[s.Name] = s
	}
	current := sets.New[string]()
	for _, r := range rejections {
		if !strings.HasPrefix(r.Binding, "recipe:") && !strings.HasPrefix(r.Binding, "context:") {
			continue
		}
		key := r.Server + "\x00" + r.Binding + "\x00" + r.Reason
		current.Insert(key)
		if s, ok := byName[r.Server]; ok && !c.rejected.Has(key) {
			c.recorder.Eventf(s, corev1.EventTypeWarning, "BindingRejected", "%s: %s", r.Binding, r.Reason)
		}
	}
	c.rejected = current
}

// syncDefaults ensures L0/L1 only. It never deletes: sweeping is the full
// pass's job, so this cheap pass cannot race it into double deletes.
func (c *Controller) syncDefaults(ctx context.Context) error {
	live, err := c.livePolicies()
	if err != nil {
		return err
	}
	isDefault := func(p *networkingv1.NetworkPolicy) bool { return defaultTypes[p.Labels[names.LabelPolicyType]] }
	ch := diff(netpol.Defaults(c.opts.Plan), live, c.opts.Caps, isDefault, nil)
	missing := sets.New[string]()
	if err := c.write(ctx, "create", ch.creates, missing); err != nil {
		return err
	}
	if err := c.write(ctx, "update", ch.updates, missing); err != nil {
		return err
	}
	return missingNamespaces(missing)
}

// withheld names the external-egress policies whose server and binding
// still exist. When such a policy is not desired, its allow is no longer
// proven, and revoking it is not an orphan sweep.
func withheld(inv netpol.Inventory, namespace string) map[policyKey]bool {
	out := map[policyKey]bool{}
	for _, s := range inv.Servers {
		for _, b := range s.Spec.EgressBindings {
			out[policyKey{namespace, names.ExternalEgressPolicy(s.Name, b.Name)}] = true
		}
	}
	return out
}

// observePlan records what the pass found.
func (c *Controller) observePlan(plan *netpol.Plan, ch changes) {
	byType := map[string]int{}
	for t := range ownedTypes {
		byType[t] = 0
	}
	for _, p := range plan.Policies {
		byType[p.Labels[names.LabelPolicyType]]++
	}
	for t, n := range byType {
		c.metrics.Policies.WithLabelValues(t).Set(float64(n))
	}
	c.metrics.Orphans.Set(float64(len(ch.orphans)))
	c.metrics.Rejections.Set(float64(len(plan.Rejections)))
	c.metrics.ContextIgnore.Set(float64(len(plan.Conflicts)))
	if ch.capped != "" {
		c.metrics.OrphanCapped.WithLabelValues(ch.capped).Inc()
		c.log.Warn().Int("orphans", len(ch.orphans)).Str("rule", ch.capped).
			Int("absoluteCap", c.opts.Caps.Absolute).Int("percentCap", c.opts.Caps.Percent).
			Msg("orphan delete cap tripped: no orphan deleted; raise the cap to let the sweep proceed")
	}
	if len(ch.creates)+len(ch.updates)+len(ch.revokes)+len(ch.deletes) > 0 {
		c.log.Info().Int("creates", len(ch.creates)).Int("updates", len(ch.updates)).
			Int("revokes", len(ch.revokes)).Int("orphanDeletes", len(ch.deletes)).
			Int("desired", len(plan.Policies)).Msg("applying NetworkPolicy changes")
	}
}

// write applies one verb to each policy. It stops at the first failure that
// is not already the desired outcome (a delete of a policy that is gone), or
// a create in a namespace that does not exist, which it adds to missing and
// skips.
func (c *Controller) write(ctx context.Context, verb string, policies []*networkingv1.NetworkPolicy, missing sets.Set[string]) error {
	for _, p := range policies {
		if missing.Has(p.Namespace) {
			continue
		}
		client := c.kube.NetworkingV1().NetworkPolicies(p.Namespace)
		var err error
		switch verb {
		case "create":
			_, err = client.Create(ctx, p, metav1.CreateOptions{FieldManager: FieldManager})
		case "update":
			_, err = client.Update(ctx, p, metav1.UpdateOptions{FieldManager: FieldManager})
		case "delete":
			// The precondition makes sure we delete the orphan we judged,
			// not a policy recreated under its name since.
			err = client.Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
			if apierrors.IsNotFound(err) {
				err = nil
			}
		}
		if verb == "create" && apierrors.IsNotFound(err) {
			// The only thing a create can miss is its namespace.
			c.log.Warn().Str("namespace", p.Namespace).Msg("namespace does not exist; skipping its policies")
			missing.Insert(p.Namespace)
			continue
		}
		if err != nil {
			c.metrics.WriteErrors.WithLabelValues(verb).Inc()
			if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
				// The cache is behind the API server; the next pass sees
				// the newer object.
				return fmt.Errorf("%s %s/%s: cache out of date: %w", verb, p.Namespace, p.Name, err)
			}
			return fmt.Errorf("%s NetworkPolicy %s/%s: %w", verb, p.Namespace, p.Name, err)
		}
		c.metrics.Writes.WithLabelValues(verb).Inc()
		c.log.Debug().Str("verb", verb).Str("namespace", p.Namespace).Str("name", p.Name).Msg("NetworkPolicy written")
	}
	return nil
}

// reportConflicts sets the ContextIDConflict condition on every Context
// ignored for a duplicate contextId, clears it on one that is no longer, and
// emits one Warning event when a Context starts being ignored. A Context that
// never conflicted gets no condition, so healthy Contexts cost no writes.
func (c *Controller) reportConflicts(ctx context.Context, contexts []*clerumv1alpha1.Context, conflicts []netpol.ContextConflict) error {
	byName := make(map[string]netpol.ContextConflict, len(conflicts))
	for _, cf := range conflicts {
		byName[cf.Context] = cf
	}
	var errs []error
	for _, ctxObj := range contexts {
		have := meta.FindStatusCondition(ctxObj.Status.Conditions, clerumv1alpha1.ConditionContextIDConflict)
		cf, conflicted := byName[ctxObj.Name]
		if !conflicted && (have == nil || have.Status == metav1.ConditionFalse) {
			c.conflicted.Delete(ctxObj.Name)
			continue
		}
		want, reason := metav1.ConditionFalse, "Unique"
		message := "contextId " + ctxObj.Spec.ContextID + " is held by this Context"
		if conflicted {
			want, reason = metav1.ConditionTrue, "DuplicateContextID"
			message = fmt.Sprintf("contextId %s is already held by Context %s; this Context is ignored", cf.ContextID, cf.HeldBy)
			if !c.conflicted.Has(ctxObj.Name) {
				c.recorder.Event(ctxObj, corev1.EventTypeWarning, reason, message)
			}
			c.conflicted.Insert(ctxObj.Name)
		} else {
			c.conflicted.Delete(ctxObj.Name)
		}
		if have != nil && have.Status == want && have.Reason == reason && have.Message == message &&
			have.ObservedGeneration == ctxObj.Generation {
			continue
		}
		apply := applyv1alpha1.Context(ctxObj.Name, ctxObj.Namespace).WithStatus(applyv1alpha1.ContextStatus().
			WithConditions(applymetav1.Condition().
				WithType(clerumv1alpha1.ConditionContextIDConflict).WithStatus(want).
				WithReason(reason).WithMessage(message).
				WithObservedGeneration(ctxObj.Generation).
				WithLastTransitionTime(transitionTime(have, want, c.clock.Now()))))
		_, err := c.hcc.ClerumV1alpha1().Contexts(ctxObj.Namespace).ApplyStatus(ctx, apply,
			metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("Context %s/%s status: %w", ctxObj.Namespace, ctxObj.Name, err))
		}
	}
	return errors.Join(errs...)
}

// transitionTime keeps the last transition time while the status holds.
func transitionTime(have *metav1.Condition, want metav1.ConditionStatus, now time.Time) metav1.Time {
	if have != nil && have.Status == want {
		return have.LastTransitionTime
	}
	return metav1.NewTime(now)
}

func filter(ps []*networkingv1.NetworkPolicy, keep func(*networkingv1.NetworkPolicy) bool) []*networkingv1.NetworkPolicy {
	var out []*networkingv1.NetworkPolicy
	for _, p := range ps {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

func not(f func(*networkingv1.NetworkPolicy) bool) func(*networkingv1.NetworkPolicy) bool {
	return func(p *networkingv1.NetworkPolicy) bool { return !f(p) }
}
