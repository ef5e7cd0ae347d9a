package kit

// Caps bound an orphan sweep's unexplained deletes (docs/ownership.md): objects
// HCC manages that nothing in the live inventory, nor any deletion this
// process observed, accounts for. A tripped cap holds back those deletes
// only; disowned objects and those of an observed deletion go whatever the
// caps. The NetworkPolicy operator and the Host operator share the rule.
type Caps struct {
	// Absolute refuses every unexplained delete when the orphans number
	// more than this; checked first.
	Absolute int
	// Percent refuses every unexplained delete when the orphans number
	// strictly more than this percentage of the listed managed fleet;
	// inert while that percentage of the fleet is below one object.
	Percent int
}

// The rules of Caps, as Capped names them (and the NetworkPolicy operator's
// clerum_hcc_netpol_orphan_sweep_capped_total labels them).
const (
	CapRuleAbsolute = "absolute"
	CapRulePercent  = "percent"
)

// CapRules lists every rule Capped may name.
var CapRules = []string{CapRuleAbsolute, CapRulePercent}

// Capped reports whether deleting orphans out of a listed fleet is refused,
// and by which rule: CapRuleAbsolute or CapRulePercent.
func (c Caps) Capped(orphans, listed int) (bool, string) {
	if orphans == 0 {
		return false, ""
	}
	if orphans > c.Absolute {
		return true, CapRuleAbsolute
	}
	limit := float64(listed) * float64(c.Percent) / 100
	if limit >= 1 && float64(orphans) > limit {
		return true, CapRulePercent
	}
	return false, ""
}
