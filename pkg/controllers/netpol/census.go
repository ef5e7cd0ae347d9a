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
// this operator's scope by type, the orphan candidates a full pass would
// find, and whether the caps would refuse deleting them.
type Census struct {
	ByType  map[string]int
	Listed  int
	Orphans []CensusEntry
	// Withheld are allows of live servers that a pass would revoke unless
	// DNS proves them again; the census does not resolve names.
	Withheld []CensusEntry
	Caps     Caps
	Capped   string // the rule that would trip, or ""
}

// CensusEntry is one policy in a census.
type CensusEntry struct{ Namespace, Name, Type string }

// TakeCensus compares live with the plan for inv, exactly as a full pass
// would, without resolving hostnames: every hostname allow counts as
// withheld rather than orphaned.
func TakeCensus(live []*networkingv1.NetworkPolicy, inv netpol.Inventory, opts netpol.Options, caps Caps) Census {
	c := Census{ByType: map[string]int{}, Caps: caps}
	for _, p := range live {
		if owned(p) {
			c.ByType[censusType(p)]++
			c.Listed++
		}
	}
	ch := diff(netpol.Compute(inv, opts).Policies, live, caps, nil, withheld(inv, opts.McpServerNamespace))
	for _, p := range ch.revokes {
		c.Withheld = append(c.Withheld, CensusEntry{p.Namespace, p.Name, censusType(p)})
	}
	for _, p := range ch.orphans {
		c.Orphans = append(c.Orphans, CensusEntry{p.Namespace, p.Name, censusType(p)})
	}
	c.Capped = ch.capped
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
	list("orphan candidates", c.Orphans)
	list("withheld hostname allows (revoked unless DNS proves them)", c.Withheld)
	fmt.Fprintf(w, "\norphan delete caps: absolute %d (%s), percent %d (%s)\n",
		c.Caps.Absolute, absoluteSource, c.Caps.Percent, percentSource)
	if c.Capped != "" {
		fmt.Fprintf(w, "cap would trip: yes, by the %s rule: no orphan would be deleted\n", c.Capped)
	} else {
		fmt.Fprintf(w, "cap would trip: no\n")
	}
	return nil
}
