package host

import (
	"context"
	"errors"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	klabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/cache"

	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/names"
)

// child is one object the caches show as a Host's.
type child struct {
	kind string
	host string // the clerum.io/host label
	live metav1.Object
	// delete deletes it if it is the Host's by the ownership rule.
	delete func(context.Context) (bool, error)
}

// collect appends the items of one kind to out.
func collect[T kit.Child](out []child, c *kit.Children, kind kit.Kind[T], items []T) []child {
	for _, o := range items {
		host := o.GetLabels()[names.LabelHost]
		out = append(out, child{kind: kind.Name, host: host, live: o, delete: func(ctx context.Context) (bool, error) {
			return kit.DeleteChild(ctx, c, kind, gvk, host, names.LabelHost, o)
		}})
	}
	return out
}

// inventory returns every managed object the caches show that sel selects
// among the kinds the Host operator writes, in both namespaces; claims only
// with withClaims.
func (c *Controller) inventory(sel klabels.Selector, withClaims bool) []child {
	hostNS, readerNS := c.cfg.Build.HostNamespace, c.cfg.Build.ChannelsNamespace
	var out []child
	// A lister never fails; an error would leave a kind out, never add one.
	d, _ := c.deployments.Deployments(hostNS).List(sel)
	out = collect(out, c.children, kit.Deployments, d)
	s, _ := c.services.Services(hostNS).List(sel)
	out = collect(out, c.children, kit.Services, s)
	sa, _ := c.accounts.ServiceAccounts(hostNS).List(sel)
	out = collect(out, c.children, kit.ServiceAccounts, sa)
	r, _ := c.roles.Roles(hostNS).List(sel)
	out = collect(out, c.children, kit.Roles, r)
	rb, _ := c.bindings.RoleBindings(hostNS).List(sel)
	out = collect(out, c.children, kit.RoleBindings, rb)
	p, _ := c.policies.NetworkPolicies(hostNS).List(sel)
	out = collect(out, c.children, kit.NetworkPolicies, p)
	sec, _ := c.secrets.Secrets(hostNS).List(sel)
	out = collect(out, c.children, kit.Secrets, sec)
	rd, _ := c.readerDeployments.Deployments(readerNS).List(sel)
	out = collect(out, c.children, kit.Deployments, rd)
	rs, _ := c.readerServices.Services(readerNS).List(sel)
	out = collect(out, c.children, kit.Services, rs)
	rp, _ := c.readerPolicies.NetworkPolicies(readerNS).List(sel)
	out = collect(out, c.children, kit.NetworkPolicies, rp)
	if withClaims {
		pvc, _ := c.claims.PersistentVolumeClaims(hostNS).List(sel)
		out = collect(out, c.children, kit.PersistentVolumeClaims, pvc)
	}
	return out
}

// childrenOf returns host's children, its workspace claim included.
func (c *Controller) childrenOf(host string) []child {
	return c.inventory(klabels.SelectorFromSet(klabels.Set{
		names.LabelManagedBy: names.ManagedByValue, names.LabelHost: names.Label(host)}), true)
}

// sweep is the startup and periodic full reconcile: it queues every Host
// and deletes the per-Host objects of Hosts that no longer exist, in both
// namespaces (docs/host.md, "Orphans"):
//
//   - the leftovers of a Host this process saw deleted are explained and
//     deleted whatever the caps, its workspace claim included;
//   - the others are unexplained — left from Hosts deleted while no
//     controller ran, or an inventory gone wrong — and deleted only when
//     they stay within HCC_HOST_ORPHAN_DELETE_CAP and …_PERCENT of the
//     managed per-Host objects; over either cap none of them is deleted;
//   - a workspace claim is never deleted as an unexplained orphan: it
//     holds a user's files.
func (c *Controller) sweep(ctx context.Context, _ string) (kit.Result, error) {
	var result kit.Result
	if c.cfg.Resync > 0 {
		result.RequeueAfter = c.cfg.Resync
	}
	// The inventory before the Hosts: a Host created in between has its
	// children counted as live, never the other way round.
	hasHost, _ := klabels.NewRequirement(names.LabelHost, selection.Exists, nil)
	managed, _ := klabels.NewRequirement(names.LabelManagedBy, selection.Equals, []string{names.ManagedByValue})
	all := c.inventory(klabels.NewSelector().Add(*managed, *hasHost), true)
	hosts, err := c.hosts.Hosts(c.cfg.Build.HostNamespace).List(klabels.Everything())
	if err != nil {
		return result, err
	}
	exists := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		exists[names.Label(h.Name)] = true
		c.queue.Add(cache.ObjectName{Namespace: h.Namespace, Name: h.Name})
	}

	var explained, unexplained []child
	claimsKept := 0
	for _, ch := range all {
		switch {
		case exists[ch.host] || ch.live.GetDeletionTimestamp() != nil:
		case c.state.deleted.Leftover(ch.host, ch.live):
			explained = append(explained, ch)
		case ch.kind == kit.PersistentVolumeClaims.Name:
			claimsKept++
		default:
			unexplained = append(unexplained, ch)
		}
	}
	var errs []error
	del := func(chs []child, class string) {
		for _, ch := range chs {
			deleted, err := ch.delete(ctx)
			if err != nil {
				errs = append(errs, err)
			} else if deleted {
				c.metrics.Orphans.WithLabelValues(class).Inc()
			}
		}
	}
	del(explained, "explained")
	// The caps count Hosts, not objects: one Host leaves about ten.
	orphaned, listed := hostsOf(unexplained), hostsOf(all)
	if capped, rule := c.cfg.Caps.Capped(len(orphaned), len(listed)); capped {
		c.metrics.CapTrips.Inc()
		c.log.Warn().Str("cap", rule).Int("orphanedHosts", len(orphaned)).Int("hostsWithObjects", len(listed)).
			Strs("hosts", orphaned).
			Msg("orphaned per-Host objects left in place: more than HCC_HOST_ORPHAN_DELETE_CAP(_PERCENT) allow; delete them by hand if their Hosts are really gone")
	} else {
		del(unexplained, "unexplained")
	}
	if claimsKept > 0 {
		c.log.Info().Int("claims", claimsKept).Msg("workspace claims of Hosts not seen deleted are kept (never deleted as orphans)")
	}
	// An observed deletion with nothing left is settled.
	for _, ch := range explained {
		if len(c.childrenOf(ch.host)) == 0 {
			c.state.deleted.Settle(ch.host)
		}
	}
	return result, errors.Join(errs...)
}

// hostsOf lists the Hosts chs belong to, sorted, once each.
func hostsOf(chs []child) []string {
	seen := map[string]bool{}
	var out []string
	for _, ch := range chs {
		if !seen[ch.host] {
			seen[ch.host] = true
			out = append(out, ch.host)
		}
	}
	sort.Strings(out)
	return out
}
