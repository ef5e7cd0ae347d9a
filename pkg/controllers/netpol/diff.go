package netpol

import (
	"bytes"
	"sort"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/clerum/hcc/pkg/names"
)

// ownedTypes are the policy types this operator plans and sweeps. Policies of
// other types (the Host operator's "host", the filesystem reconcilers'
// "filesystem") are never touched, even when they look orphaned.
var ownedTypes = map[string]bool{
	names.PolicyTypeDenyAll:        true,
	names.PolicyTypeInfrastructure: true,
	names.PolicyTypeContextAllow:   true,
	names.PolicyTypeRPCProxyEgress: true,
	names.PolicyTypeExternalEgress: true,
	names.PolicyTypeRecipeBinding:  true,
}

// defaultTypes are the L0/L1 types the defaults-only pass writes.
var defaultTypes = map[string]bool{
	names.PolicyTypeDenyAll:        true,
	names.PolicyTypeInfrastructure: true,
}

// reservedPrefixes are the name patterns of contract section 4 that belong
// to this operator. A managed policy with one of these names but no
// policy-type label (the "repairable class": written by an older HCC, or
// its label stripped by hand) is still ours: repaired when desired, swept
// when not.
var reservedPrefixes = []string{
	"deny-all-", "allow-dns-egress-", "allow-hcc-api-egress-", "allow-k8s-api-egress-",
	"ctx-", "rpc-egress-", "ext-egress-", "bind-",
}

func isReservedName(name string) bool {
	if name == names.HCCAPIIngressPolicy {
		return true
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(name, p) {
			return name != p
		}
	}
	return false
}

// owned reports whether a live policy is in this operator's sweep scope:
// managed by HCC and either of an owned type, or unlabelled with a reserved
// name.
func owned(p *networkingv1.NetworkPolicy) bool {
	if p.Labels[names.LabelManagedBy] != names.ManagedByValue {
		return false
	}
	typ, ok := p.Labels[names.LabelPolicyType]
	if !ok {
		return isReservedName(p.Name)
	}
	return ownedTypes[typ]
}

// Caps bound how many orphans one pass may delete.
type Caps struct {
	// Absolute refuses every orphan delete when the orphans number more
	// than this; checked first.
	Absolute int
	// Percent refuses every orphan delete when the orphans number strictly
	// more than this percentage of the listed managed fleet; inert while
	// that percentage of the fleet is below one policy.
	Percent int
}

// capped reports whether deleting orphans out of a listed fleet is refused,
// and by which rule.
func (c Caps) capped(orphans, listed int) (bool, string) {
	if orphans == 0 {
		return false, ""
	}
	if orphans > c.Absolute {
		return true, "absolute"
	}
	limit := float64(listed) * float64(c.Percent) / 100
	if limit >= 1 && float64(orphans) > limit {
		return true, "percent"
	}
	return false, ""
}

// changes is the difference between the desired and the live policy sets.
type changes struct {
	creates []*networkingv1.NetworkPolicy
	// updates hold the desired object with the live object's metadata
	// (resourceVersion, foreign labels) already merged in.
	updates []*networkingv1.NetworkPolicy
	// revokes are withheld policies: always deleted.
	revokes []*networkingv1.NetworkPolicy
	orphans []*networkingv1.NetworkPolicy // orphan candidates, deleted or not
	deletes []*networkingv1.NetworkPolicy // orphans, unless capped
	// capped names the rule that refused the orphan deletes, if any.
	capped string
}

// policyKey identifies a policy by namespace and name.
type policyKey struct{ ns, name string }

// diff compares desired with the live policies in scope. Only live
// policies for which owned() holds take part. keep, when not nil, filters
// which desired and live policies the pass considers (the defaults-only pass
// looks at L0/L1 only).
//
// A live policy that is not desired is either withheld — its owner still
// exists but the allow is no longer proven (a failed DNS refresh, a rejected
// binding) — and then always revoked, or an orphan, whose deletion the caps
// may refuse: the caps guard against a wrong or empty inventory wiping the
// fleet, not against revoking what the inventory itself disowns.
func diff(desired, live []*networkingv1.NetworkPolicy, caps Caps, keep func(*networkingv1.NetworkPolicy) bool, withheld map[policyKey]bool) changes {
	type key = policyKey
	liveByKey := make(map[key]*networkingv1.NetworkPolicy, len(live))
	listed := 0
	for _, p := range live {
		if !owned(p) || (keep != nil && !keep(p)) {
			continue
		}
		liveByKey[key{p.Namespace, p.Name}] = p
		listed++
	}

	var c changes
	for _, want := range desired {
		if keep != nil && !keep(want) {
			continue
		}
		k := key{want.Namespace, want.Name}
		have, ok := liveByKey[k]
		if !ok {
			c.creates = append(c.creates, want)
			continue
		}
		delete(liveByKey, k)
		if upd := updateFor(want, have); upd != nil {
			c.updates = append(c.updates, upd)
		}
	}

	for k, p := range liveByKey {
		if withheld[k] {
			c.revokes = append(c.revokes, p)
		} else {
			c.orphans = append(c.orphans, p)
		}
	}
	sortPolicies(c.revokes)
	sortPolicies(c.orphans)
	if capped, rule := caps.capped(len(c.orphans), listed); capped {
		c.capped = rule
	} else {
		c.deletes = c.orphans
	}
	return c
}

func sortPolicies(ps []*networkingv1.NetworkPolicy) {
	sort.Slice(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		return a.Namespace < b.Namespace || (a.Namespace == b.Namespace && a.Name < b.Name)
	})
}

// updateFor returns the object to write when live differs from want, or nil
// when live already matches: same spec (semantically, after API-server
// defaulting — the planner sets every defaulted field itself) and want's
// labels present with want's values. Labels others added are kept.
func updateFor(want, live *networkingv1.NetworkPolicy) *networkingv1.NetworkPolicy {
	labelsMatch := true
	for k, v := range want.Labels {
		if live.Labels[k] != v {
			labelsMatch = false
			break
		}
	}
	if labelsMatch && specEqual(&want.Spec, &live.Spec) {
		return nil
	}
	upd := live.DeepCopy()
	upd.Spec = *want.Spec.DeepCopy()
	if upd.Labels == nil {
		upd.Labels = make(map[string]string, len(want.Labels))
	}
	for k, v := range want.Labels {
		upd.Labels[k] = v
	}
	return upd
}

// specEqual compares two specs by their protobuf encoding: the generated
// marshaller is reflection-free and writes map keys in sorted order, and it
// encodes nil and empty slices and maps alike, as semantic equality treats
// them. It is several times faster than equality.Semantic.DeepEqual, which
// matters when a pass compares tens of thousands of policies.
func specEqual(a, b *networkingv1.NetworkPolicySpec) bool {
	ab, errA := a.Marshal()
	bb, errB := b.Marshal()
	if errA != nil || errB != nil {
		return equality.Semantic.DeepEqual(a, b)
	}
	return bytes.Equal(ab, bb)
}
