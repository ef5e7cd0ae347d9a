package netpol

import (
	"bytes"
	"sort"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/netpol"
)

// ownedTypes are the policy types this operator plans and sweeps, from the
// one table of writers in pkg/names. Policies of other writers' types (the
// Host operator's "host", the filesystem reconcilers' "filesystem") are
// never touched, even when they look orphaned.
var ownedTypes = func() map[string]bool {
	m := map[string]bool{}
	for _, t := range names.WriterPolicyTypes(names.WriterNetworkPolicy) {
		m[t] = true
	}
	return m
}()

// defaultTypes are the L0/L1 types: ensured by every pass, never swept.
var defaultTypes = map[string]bool{
	names.PolicyTypeDenyAll:        true,
	names.PolicyTypeInfrastructure: true,
}

// policyType returns the type of a managed policy in this operator's scope:
// its label, or for the repairable class (managed by HCC, a name this
// operator reserves, no policy-type label: written by an older HCC, or its
// label stripped by hand) the type its name implies. ok is false for a
// policy this operator must not write or delete (docs/ownership.md): not
// managed by HCC, or of another writer's type.
func policyType(p *networkingv1.NetworkPolicy) (typ string, ok bool) {
	if p.Labels[names.LabelManagedBy] != names.ManagedByValue {
		return "", false
	}
	// This operator sets no owner references: a policy some controller
	// owns is that controller's, whatever its labels say.
	if metav1.GetControllerOfNoCopy(p) != nil {
		return "", false
	}
	if typ, labelled := p.Labels[names.LabelPolicyType]; labelled {
		return typ, ownedTypes[typ]
	}
	return names.NetPolReservedType(p.Name)
}

// owned reports whether a live policy is in this operator's scope.
func owned(p *networkingv1.NetworkPolicy) bool {
	_, ok := policyType(p)
	return ok
}

func isDefault(p *networkingv1.NetworkPolicy) bool {
	typ, _ := policyType(p)
	return defaultTypes[typ]
}

// Caps are the orphan caps (CONTEXT_MAPPER_NETPOL_ORPHAN_DELETE_CAP, …_PERCENT);
// the rule is the kit's, shared with the Host operator.
type Caps = kit.Caps

// changes is the difference between the desired and the live policy sets.
type changes struct {
	creates []*networkingv1.NetworkPolicy
	// updates hold the desired object with the live object's metadata
	// (resourceVersion, foreign labels) already merged in.
	updates []*networkingv1.NetworkPolicy
	// revokes are disowned policies: deleted whatever the caps.
	revokes []*networkingv1.NetworkPolicy
	orphans []*networkingv1.NetworkPolicy // unexplained, deleted or not
	deletes []*networkingv1.NetworkPolicy // orphans, unless capped
	// kept are unplanned L0/L1 policies, ensured but never swept.
	kept []*networkingv1.NetworkPolicy
	// conflicts are live policies of another writer holding names this
	// operator plans: never written, reported.
	conflicts []*networkingv1.NetworkPolicy
	// capped names the rule that refused the orphan deletes, if any.
	capped string
	// servers attributes revoked and orphaned policies to the McpServer
	// they were derived from, where one is known.
	servers map[policyKey]string
}

// policyKey identifies a policy by namespace and name.
type policyKey struct{ ns, name string }

func keyOf(p *networkingv1.NetworkPolicy) policyKey { return policyKey{p.Namespace, p.Name} }

// disposer says what to do with an unplanned live policy of type typ.
type disposer func(p *networkingv1.NetworkPolicy, typ string) (netpol.Disposition, string)

// diff compares desired with the live policies. Only live policies in this
// operator's scope (owned) take part; keep, when not nil, further filters
// which desired and live policies the pass considers (the defaults-only pass
// looks at L0/L1 only).
//
// A live policy that is not desired goes where dispose sends it: revoked
// whatever the caps when the inventory disowns it, kept when it is L0/L1,
// otherwise an orphan whose deletion the caps may refuse. The caps guard
// against a wrong or empty inventory wiping the fleet, not against revoking
// what the inventory itself disowns.
//
// desiredServers, when as long as desired, names the server each desired
// policy is for; the writes it attributes go into changes.servers.
func diff(desired []*networkingv1.NetworkPolicy, desiredServers []string, live []*networkingv1.NetworkPolicy, caps Caps,
	keep func(*networkingv1.NetworkPolicy) bool, dispose disposer) changes {
	if len(desiredServers) != len(desired) {
		desiredServers = nil
	}
	liveByKey := make(map[policyKey]*networkingv1.NetworkPolicy, len(live))
	foreign := map[policyKey]*networkingv1.NetworkPolicy{}
	listed := 0
	for _, p := range live {
		if !owned(p) {
			// Managed by HCC but another writer's: a name it holds is never
			// ours to write.
			foreign[keyOf(p)] = p
			continue
		}
		if keep != nil && !keep(p) {
			continue
		}
		liveByKey[keyOf(p)] = p
		listed++
	}

	c := changes{servers: map[policyKey]string{}}
	for i, want := range desired {
		if keep != nil && !keep(want) {
			continue
		}
		k := keyOf(want)
		have, ok := liveByKey[k]
		written := true
		switch {
		case ok:
			delete(liveByKey, k)
			upd := updateFor(want, have)
			if written = upd != nil; written {
				c.updates = append(c.updates, upd)
			}
		case foreign[k] != nil:
			c.conflicts = append(c.conflicts, foreign[k])
		default:
			c.creates = append(c.creates, want)
		}
		if written && desiredServers != nil && desiredServers[i] != "" {
			c.servers[k] = desiredServers[i]
		}
	}

	for k, p := range liveByKey {
		typ, _ := policyType(p)
		d, server := dispose(p, typ)
		if s := p.Labels[names.LabelMcpServer]; server == "" && s != "" {
			server = s
		}
		if server != "" {
			c.servers[k] = server
		}
		switch d {
		case netpol.Disowned:
			c.revokes = append(c.revokes, p)
		case netpol.Kept:
			c.kept = append(c.kept, p)
		default:
			c.orphans = append(c.orphans, p)
		}
	}
	sortPolicies(c.revokes)
	sortPolicies(c.orphans)
	sortPolicies(c.kept)
	if capped, rule := caps.Capped(len(c.orphans), listed); capped {
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
