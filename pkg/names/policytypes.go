package names

import "strings"

// PolicyWriter is a part of HCC that writes and sweeps NetworkPolicies of
// its own types (docs/ownership.md). Each sweep touches only its own
// writer's types, so no two writers may share a type or a name pattern;
// policytypes_test.go fails when they do.
type PolicyWriter string

// The NetworkPolicy writers.
const (
	// WriterNetworkPolicy is the NetworkPolicy operator: L0-L3 and recipe
	// bindings.
	WriterNetworkPolicy PolicyWriter = "networkpolicy"
	// WriterHost is the Host operator: the desktop and channel-reader
	// policies of each Host.
	WriterHost PolicyWriter = "host"
	// WriterFileSystem is the SharedFileSystem and GlobalFileSystem
	// reconcilers.
	WriterFileSystem PolicyWriter = "filesystem"
)

// policyNamePattern is a NetworkPolicy name a writer reserves, with the
// policy type a policy of that name has. A managed policy holding a reserved
// name but no policy-type label (written by an older HCC, or its label
// removed by hand) is "repairable": its writer relabels it when it still
// wants it and sweeps it when not.
type policyNamePattern struct {
	exact string // exactly this name; or
	// prefix, then at least one character, then suffix (may be empty).
	prefix, suffix string
	typ            string
}

// matches reports whether name is one this pattern reserves. A name with a
// suffix is also matched in the form Fit shortens it to: Fit keeps a prefix
// and replaces the rest, suffix included, with a hash, and the writer must
// still recognise its own policy.
func (p policyNamePattern) matches(name string) bool {
	if p.exact != "" {
		return name == p.exact
	}
	if !strings.HasPrefix(name, p.prefix) {
		return false
	}
	if len(name) > len(p.prefix)+len(p.suffix) && strings.HasSuffix(name, p.suffix) {
		return true
	}
	return p.suffix != "" && isFitShortened(name, MaxObjectName)
}

// IsShortened reports whether name has the shape Fit(_, max) gives a name
// longer than max: exactly max bytes ending in "-" and hashLen hex digits.
// Such a name cannot be read back into the parts it was built from.
func IsShortened(name string, max int) bool { return isFitShortened(name, max) }

func isFitShortened(name string, max int) bool {
	if len(name) != max {
		return false
	}
	tail := name[max-hashLen-1:]
	if tail[0] != '-' {
		return false
	}
	for _, c := range tail[1:] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// policyWriter is one writer's row of the table: the types it owns and the
// names it reserves.
type policyWriter struct {
	writer   PolicyWriter
	types    []string
	patterns []policyNamePattern
}

// policyWriters is the one table of NetworkPolicy ownership: the types each
// writer owns and the names it reserves (docs/names.md, docs/ownership.md).
// Every builder of a NetworkPolicy name in this package produces a name its
// writer's patterns match and no other writer's do.
var policyWriters = []policyWriter{
	{
		writer: WriterNetworkPolicy,
		types: []string{
			PolicyTypeDenyAll, PolicyTypeInfrastructure, PolicyTypeContextAllow,
			PolicyTypeRPCProxyEgress, PolicyTypeExternalEgress, PolicyTypeRecipeBinding,
		},
		patterns: []policyNamePattern{
			{prefix: "deny-all-", typ: PolicyTypeDenyAll},
			{prefix: "allow-dns-egress-", typ: PolicyTypeInfrastructure},
			{prefix: "allow-hcc-api-egress-", typ: PolicyTypeInfrastructure},
			{prefix: "allow-k8s-api-egress-", typ: PolicyTypeInfrastructure},
			{exact: HCCAPIIngressPolicy, typ: PolicyTypeInfrastructure},
			// ctx-CID-S and ctx-CID-S-egress.
			{prefix: "ctx-", typ: PolicyTypeContextAllow},
			{prefix: "rpc-egress-", typ: PolicyTypeRPCProxyEgress},
			{prefix: "ext-egress-", typ: PolicyTypeExternalEgress},
			// bind-RECIPE-FROM-TO-egress and -ingress.
			{prefix: "bind-", typ: PolicyTypeRecipeBinding},
		},
	},
	{
		writer: WriterHost,
		types:  []string{PolicyTypeHost},
		patterns: []policyNamePattern{
			{prefix: "allow-rpc-proxy-desktop-", typ: PolicyTypeHost},
			{prefix: "channel-reader-", suffix: "-egress", typ: PolicyTypeHost},
		},
	},
	{
		writer: WriterFileSystem,
		types:  []string{PolicyTypeFileSystem},
		patterns: []policyNamePattern{
			{prefix: "wfc-", suffix: "-ingress", typ: PolicyTypeFileSystem},
			{prefix: "wfc-", suffix: "-egress", typ: PolicyTypeFileSystem},
			{prefix: "gfsc-", suffix: "-egress", typ: PolicyTypeFileSystem},
		},
	},
}

// PolicyWriters returns every NetworkPolicy writer, in table order.
func PolicyWriters() []PolicyWriter {
	out := make([]PolicyWriter, 0, len(policyWriters))
	for _, w := range policyWriters {
		out = append(out, w.writer)
	}
	return out
}

// PolicyTypeWriter returns the writer owning policy type typ, and false for
// a type no writer owns (a policy no sweep may touch).
func PolicyTypeWriter(typ string) (PolicyWriter, bool) {
	for _, w := range policyWriters {
		for _, t := range w.types {
			if t == typ {
				return w.writer, true
			}
		}
	}
	return "", false
}

// WriterPolicyTypes returns the policy types writer owns: the scope of its
// sweeps and census.
func WriterPolicyTypes(writer PolicyWriter) []string {
	for _, w := range policyWriters {
		if w.writer == writer {
			return append([]string(nil), w.types...)
		}
	}
	return nil
}

// ReservedPolicyType returns the policy type name implies for writer: the
// type of the first of writer's patterns name matches, and false when it
// matches none of them.
func ReservedPolicyType(writer PolicyWriter, name string) (string, bool) {
	for _, w := range policyWriters {
		if w.writer != writer {
			continue
		}
		for _, p := range w.patterns {
			if p.matches(name) {
				return p.typ, true
			}
		}
	}
	return "", false
}

// NetPolReservedType returns the policy type of a NetworkPolicy operator
// name pattern name matches, and false when it matches none.
func NetPolReservedType(name string) (string, bool) {
	return ReservedPolicyType(WriterNetworkPolicy, name)
}
