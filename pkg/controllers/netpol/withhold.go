package netpol

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
)

// Holder changes (docs/networkpolicy.md, "Holder changes"). When a
// contextId passes from one Context to another, the old holder's Host pods
// still carry it until the Host operator has stopped them and they are
// gone. An L2 allow the new holder asks for would select those pods too, so
// while any of them lives the pass grants that contextId nothing new: its
// L2 creates are held back, and so is an update that would let an existing
// L2 policy admit more. The allows that exist stay (the old holder's pods
// had them already), revocation is untouched, and the next pass after the
// last such pod is gone grants. The withholding lives here, after the diff,
// rather than in the planner: the plan stays the pure desired set and the
// judge never sees a held-back policy (it is planned, so it is neither an
// orphan nor disowned, and an existing one is matched, never deleted).

// staleUse says why one contextId's new grants are withheld: a pod that
// carries it belongs to no Host, or to one whose Context does not hold it.
type staleUse struct {
	Pod, Host string
	// Why completes "new allows of contextId CID are withheld: ".
	Why string
}

// staleContextIDs returns, per contextId, the first (by pod name) pod that
// carries it without its Host's Context holding it; holders maps each held
// contextId to its Context. A terminating pod counts: it keeps its network
// until it is gone. pods are those of the host namespace the informer
// caches (managed by HCC); a pod that carries no contextId matches no L2
// allow and is ignored.
func staleContextIDs(pods []*corev1.Pod, hosts []*clerumv1alpha1.Host, holderOf func(id string) *clerumv1alpha1.Context) map[string]staleUse {
	byLabel := make(map[string]*clerumv1alpha1.Host, len(hosts))
	for _, h := range hosts {
		byLabel[names.Label(h.Name)] = h
	}
	sorted := slices.Clone(pods)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	stale := map[string]staleUse{}
	for _, p := range sorted {
		id := p.Labels[names.LabelContext]
		if id == "" {
			continue
		}
		if _, seen := stale[id]; seen {
			continue
		}
		label, hasHost := p.Labels[names.LabelHost]
		h := byLabel[label]
		holder := holderOf(id)
		var why string
		switch {
		case !hasHost:
			why = fmt.Sprintf("pod %s carries it and belongs to no Host", p.Name)
		case h == nil:
			why = fmt.Sprintf("pod %s of Host %s carries it, and no such Host exists", p.Name, label)
		case holder == nil:
			why = fmt.Sprintf("pod %s of Host %s carries it, and no Context holds it", p.Name, h.Name)
		case holder.Name != h.Spec.ContextRef:
			why = fmt.Sprintf("pod %s of Host %s carries it, but the Host's Context %s does not hold it (Context %s does)",
				p.Name, h.Name, h.Spec.ContextRef, holder.Name)
		default:
			continue
		}
		hostName := label
		if h != nil {
			hostName = h.Name
		}
		stale[id] = staleUse{Pod: p.Name, Host: hostName, Why: why}
	}
	return stale
}

// heldGrant is what a pass held back for one contextId.
type heldGrant struct {
	staleUse
	// Policies are the held creates and updates, as namespace/name.
	Policies []string
}

// withholdGrants removes from ch the grants of the contextIds in stale: the
// creates of their L2 policies, and the updates that would let an existing
// one admit more. An update that only narrows (or relabels) is written. An
// update that both narrows and widens — the live policy admits what the
// plan does not, and the plan admits what the live one does not — is turned
// into a revocation of the live policy, so that nothing is granted and
// nothing stale survives; the policy is created once the contextId is
// released. live is what diff compared with.
func withholdGrants(ch *changes, live []*networkingv1.NetworkPolicy, stale map[string]staleUse) map[string]*heldGrant {
	if len(stale) == 0 {
		return nil
	}
	held := map[string]*heldGrant{}
	withheld := func(p *networkingv1.NetworkPolicy) (string, bool) {
		typ, _ := policyType(p)
		if typ != names.PolicyTypeContextAllow && typ != names.PolicyTypeRPCProxyEgress {
			return "", false
		}
		id := p.Labels[names.LabelContext]
		_, ok := stale[id]
		return id, ok
	}
	hold := func(id string, p *networkingv1.NetworkPolicy) {
		g := held[id]
		if g == nil {
			g = &heldGrant{staleUse: stale[id]}
			held[id] = g
		}
		g.Policies = append(g.Policies, p.Namespace+"/"+p.Name)
	}

	creates := ch.creates[:0:0]
	for _, p := range ch.creates {
		if id, ok := withheld(p); ok {
			hold(id, p)
			continue
		}
		creates = append(creates, p)
	}
	ch.creates = creates

	liveByKey := make(map[policyKey]*networkingv1.NetworkPolicy, len(live))
	for _, p := range live {
		liveByKey[keyOf(p)] = p
	}
	updates := ch.updates[:0:0]
	for _, upd := range ch.updates {
		have := liveByKey[keyOf(upd)]
		id, ok := withheld(upd)
		if !ok || have == nil || admitsNoMore(&upd.Spec, &have.Spec) {
			updates = append(updates, upd)
			continue
		}
		hold(id, upd)
		if !admitsNoMore(&have.Spec, &upd.Spec) {
			ch.revokes = append(ch.revokes, have)
		}
	}
	ch.updates = updates
	sortPolicies(ch.revokes)
	return held
}

// admitsNoMore reports whether a policy of spec a admits nothing one of
// spec b does not: the same pods and policy types, and every rule of a
// within some rule of b. It is a sufficient test: false may only mean "not
// proven", which the caller treats as "admits more".
func admitsNoMore(a, b *networkingv1.NetworkPolicySpec) bool {
	if !equality.Semantic.DeepEqual(a.PodSelector, b.PodSelector) ||
		!sets.New(a.PolicyTypes...).Equal(sets.New(b.PolicyTypes...)) {
		return false
	}
	for _, r := range a.Ingress {
		if !slices.ContainsFunc(b.Ingress, func(x networkingv1.NetworkPolicyIngressRule) bool {
			return within(r.Ports, x.Ports) && within(r.From, x.From)
		}) {
			return false
		}
	}
	for _, r := range a.Egress {
		if !slices.ContainsFunc(b.Egress, func(x networkingv1.NetworkPolicyEgressRule) bool {
			return within(r.Ports, x.Ports) && within(r.To, x.To)
		}) {
			return false
		}
	}
	return true
}

// within reports whether the ports or peers a of a rule are among those
// of b; an empty list is every port or peer.
func within[T any](a, b []T) bool {
	if len(b) == 0 {
		return true
	}
	if len(a) == 0 {
		return false
	}
	for _, x := range a {
		if !slices.ContainsFunc(b, func(y T) bool { return equality.Semantic.DeepEqual(x, y) }) {
			return false
		}
	}
	return true
}

// staleContextIDs reads the Host pods and Hosts from the caches and
// returns the contextIds whose grants a pass withholds, judged against
// holder (the pass's inventory). The caches are read as they are even
// while passes read the inventory consistently: the withholding only ever
// holds grants back, and a pod the cache has not shown yet was started by
// a Host operator that checks the holder itself.
func (c *Controller) staleContextIDs(holder func(id string) *clerumv1alpha1.Context) (map[string]staleUse, error) {
	pods, err := c.podLister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing Host pods: %w", err)
	}
	hosts, err := c.hostLister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing Hosts: %w", err)
	}
	return staleContextIDs(pods, hosts, holder), nil
}

// reportWithheld exports how many contextIds had grants held back, logs
// the set when it changes, and emits one Warning event on the Context that
// holds a contextId when its grants start being withheld.
func (c *Controller) reportWithheld(held map[string]*heldGrant, holder func(id string) *clerumv1alpha1.Context) {
	c.metrics.GrantsWithheld.Set(float64(len(held)))
	ids := make([]string, 0, len(held))
	for id := range held {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		g := held[id]
		message := fmt.Sprintf("new allows of contextId %s are withheld: %s; they are granted once it is gone (held back: %s)",
			id, g.Why, strings.Join(g.Policies, ", "))
		if !c.grantsWarned.Has(id) {
			c.log.Warn().Str("contextId", id).Str("host", g.Host).Str("pod", g.Pod).Strs("policies", g.Policies).
				Msg("new allows of the contextId withheld: a pod carrying it is not its holder's")
			if ctxObj := holder(id); ctxObj != nil {
				c.recorder.Event(ctxObj, corev1.EventTypeWarning, reasons.EventGrantsWithheld, message)
			}
		}
	}
	for id := range c.grantsWarned {
		if _, still := held[id]; !still {
			c.log.Info().Str("contextId", id).Msg("the contextId's allows are no longer withheld")
		}
	}
	c.grantsWarned = sets.KeySet(held)
}

// podMetadata is the transform of the Host pod informer: a pass reads only
// a pod's name, labels and whether it is terminating, and there can be
// thousands of Host pods.
func podMetadata(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a tombstone
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: p.Name, Namespace: p.Namespace, Labels: p.Labels, DeletionTimestamp: p.DeletionTimestamp,
	}}, nil
}

// podHandlers signal a pass when a Host pod may have stopped withholding a
// contextId's grants: it is gone, or its contextId or Host label changed.
// A new pod signals nothing: it can only withhold, and a pass that would
// grant is signalled by whatever asks for the grant.
func (c *Controller) podHandlers() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur any) {
			o, okOld := old.(*corev1.Pod)
			n, okNew := cur.(*corev1.Pod)
			if !okOld || !okNew || o.Labels[names.LabelContext] != n.Labels[names.LabelContext] ||
				o.Labels[names.LabelHost] != n.Labels[names.LabelHost] {
				c.Signal()
			}
		},
		DeleteFunc: func(obj any) {
			p, ok := kit.Unwrap(obj).(*corev1.Pod)
			if !ok || p.Labels[names.LabelContext] != "" {
				c.Signal() // an unreadable tombstone signals, to be safe
			}
		},
	}
}

// hostHandlers signal a pass when a Host appears or its contextRef
// changes: either may vouch for pods that withheld a contextId's grants.
// A Host's deletion can only withhold more; its pods' deletions signal.
func (c *Controller) hostHandlers() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.Signal() },
		UpdateFunc: func(old, cur any) {
			o, okOld := old.(*clerumv1alpha1.Host)
			n, okNew := cur.(*clerumv1alpha1.Host)
			if !okOld || !okNew || o.Spec.ContextRef != n.Spec.ContextRef {
				c.Signal()
			}
		},
	}
}
