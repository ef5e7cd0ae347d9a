package netpol

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/netpol"
)

// repairableType labels the repairable class in a census: managed by HCC,
// a reserved name, no policy-type label.
const repairableType = "(repairable)"

// Census is what `hcc-controller census` reports: the managed policies in
// this operator's scope by type, and what a full pass would do with the
// ones it no longer plans — revoke the disowned whatever the caps, keep the
// stale L0/L1, and delete the unexplained orphans unless a cap refuses.
type Census struct {
	ByType map[string]int
	Listed int
	// Disowned are allows the inventory disowns: revoked whatever the
	// caps. Hostname allows of live bindings are among them here, since the
	// census does not resolve names; a pass keeps those DNS still proves.
	Disowned []CensusEntry
	// Orphans are policies nothing explains; only these count against the
	// caps. The census observes no deletions, so the allows of an owner
	// deleted a moment ago are here too.
	Orphans []CensusEntry
	// Stale are L0/L1 policies of namespaces no longer on the runtime
	// list: kept, never swept (docs/operating.md, "Removing the L0/L1
	// policies of a namespace", says how to remove them).
	Stale []CensusEntry
	// DenyAllHolders are the policies HCC may not write that hold a runtime
	// namespace's deny-all name (live must include them: the census reads
	// each such name whoever holds it).
	DenyAllHolders []DenyAllHolder
	Caps           Caps
	Capped         string // the rule that would trip, or ""
}

// DenyAllHolder is a policy HCC does not own holding a deny-all name. Why
// is empty when it is a default deny and counts as the namespace's; else it
// says why it withholds readiness.
type DenyAllHolder struct{ Namespace, Name, Why string }

// CensusEntry is one policy in a census.
type CensusEntry struct{ Namespace, Name, Type string }

// TakeCensus compares live with the plan for inv, exactly as a full pass
// would, without resolving hostnames and without observed deletions.
func TakeCensus(live []*networkingv1.NetworkPolicy, inv netpol.Inventory, opts netpol.Options, caps Caps) Census {
	c := Census{ByType: map[string]int{}, Caps: caps}
	for _, p := range live {
		if owned(p) {
			c.ByType[censusType(p)]++
			c.Listed++
		}
	}
	judge := netpol.NewJudge(inv, opts, netpol.Observed{})
	plan := netpol.Compute(inv, opts)
	ch := diff(plan.Policies, plan.Servers, live, caps, nil, judge.Dispose)
	entries := func(ps []*networkingv1.NetworkPolicy) []CensusEntry {
		var out []CensusEntry
		for _, p := range ps {
			out = append(out, CensusEntry{p.Namespace, p.Name, censusType(p)})
		}
		return out
	}
	c.Disowned, c.Orphans, c.Stale = entries(ch.revokes), entries(ch.orphans), entries(ch.kept)
	c.Capped = ch.capped
	runtime := map[string]bool{}
	for _, ns := range opts.RuntimeNamespaces {
		runtime[ns] = true
	}
	for _, p := range ch.conflicts {
		if runtime[p.Namespace] && p.Name == names.DenyAllPolicy(p.Namespace) {
			c.DenyAllHolders = append(c.DenyAllHolders, DenyAllHolder{p.Namespace, p.Name, netpol.NotADefaultDeny(&p.Spec)})
		}
	}
	return c
}

func censusType(p *networkingv1.NetworkPolicy) string {
	if t, ok := p.Labels[names.LabelPolicyType]; ok {
		return t
	}
	return repairableType
}

// Write prints the census for a person. capSource says where each cap's
// value came from.
func (c Census) Write(w io.Writer, absoluteSource, percentSource string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "POLICY TYPE\tCOUNT\n")
	types := make([]string, 0, len(c.ByType))
	for t := range c.ByType {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		fmt.Fprintf(tw, "%s\t%d\n", t, c.ByType[t])
	}
	fmt.Fprintf(tw, "total\t%d\n", c.Listed)
	if err := tw.Flush(); err != nil {
		return err
	}
	list := func(title string, entries []CensusEntry) {
		fmt.Fprintf(w, "\n%s: %d\n", title, len(entries))
		for _, e := range entries {
			fmt.Fprintf(w, "  %s/%s\t%s\n", e.Namespace, e.Name, e.Type)
		}
	}
	list("disowned allows (revoked whatever the caps; hostname allows DNS still proves are kept)", c.Disowned)
	list("unexplained orphans (only these count against the caps)", c.Orphans)
	list("stale L0/L1 policies (kept, never swept)", c.Stale)
	fmt.Fprintf(w, "\ndeny-all names held by policies HCC does not manage: %d\n", len(c.DenyAllHolders))
	for _, h := range c.DenyAllHolders {
		verdict := "a default deny: counts as the namespace's"
		if h.Why != "" {
			verdict = "not a default deny, withholds readiness: " + h.Why
		}
		fmt.Fprintf(w, "  %s/%s\t%s\n", h.Namespace, h.Name, verdict)
	}
	fmt.Fprintf(w, "\norphan delete caps: absolute %d (%s), percent %d (%s)\n",
		c.Caps.Absolute, absoluteSource, c.Caps.Percent, percentSource)
	if c.Capped != "" {
		fmt.Fprintf(w, "cap would trip: yes, by the %s rule: no unexplained orphan would be deleted; disowned allows still would be\n", c.Capped)
	} else {
		fmt.Fprintf(w, "cap would trip: no\n")
	}
	return nil
}
