package names

import "strings"

// NetworkPolicy name patterns each writer reserves, with the policy type a
// policy of that pattern has. A managed policy holding a reserved name but no
// policy-type label (written by an older HCC, or its label removed by hand)
// is "repairable": its writer relabels it when it still wants it and sweeps
// it when not. See docs/names.md.
type reservedPattern struct {
	prefix string // a name starting with prefix, and longer than it
	exact  string // or exactly this name
	typ    string
}

// netpolPatterns are the names of the NetworkPolicy operator (L0-L3 and
// recipe bindings). The Host and filesystem operators' patterns
// (allow-rpc-proxy-desktop-, channel-reader-, wfc-, gfsc-) are theirs and
// never match here.
var netpolPatterns = []reservedPattern{
	{prefix: "deny-all-", typ: PolicyTypeDenyAll},
	{prefix: "allow-dns-egress-", typ: PolicyTypeInfrastructure},
	{prefix: "allow-hcc-api-egress-", typ: PolicyTypeInfrastructure},
	{prefix: "allow-k8s-api-egress-", typ: PolicyTypeInfrastructure},
	{exact: HCCAPIIngressPolicy, typ: PolicyTypeInfrastructure},
	{prefix: "ctx-", typ: PolicyTypeContextAllow},
	{prefix: "rpc-egress-", typ: PolicyTypeRPCProxyEgress},
	{prefix: "ext-egress-", typ: PolicyTypeExternalEgress},
	{prefix: "bind-", typ: PolicyTypeRecipeBinding},
}

// NetPolReservedType returns the policy type of a NetworkPolicy operator
// name pattern name matches, and false when it matches none.
func NetPolReservedType(name string) (string, bool) {
	for _, p := range netpolPatterns {
		if p.exact != "" && name == p.exact {
			return p.typ, true
		}
		if p.prefix != "" && len(name) > len(p.prefix) && strings.HasPrefix(name, p.prefix) {
			return p.typ, true
		}
	}
	return "", false
}
