package names

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The sweeps of different writers stay apart only if no policy type and no
// policy name is claimed by two of them: one writer's sweep would otherwise
// delete, or relabel, another's policy. These tests hold the table in
// policytypes.go to that, and every name builder of this package to the
// table.

// policyBuilder is a NetworkPolicy name builder of this package with the
// writer and type its policies have.
type policyBuilder struct {
	writer PolicyWriter
	typ    string
	args   int
	build  func(a []string) string
}

// policyBuilders lists every NetworkPolicy name this package derives, keyed
// by the identifier; TestEveryPolicyBuilderIsListed keeps it complete.
var policyBuilders = map[string]policyBuilder{
	"DenyAllPolicy":      {WriterNetworkPolicy, PolicyTypeDenyAll, 1, func(a []string) string { return DenyAllPolicy(a[0]) }},
	"DNSEgressPolicy":    {WriterNetworkPolicy, PolicyTypeInfrastructure, 1, func(a []string) string { return DNSEgressPolicy(a[0]) }},
	"HCCAPIEgressPolicy": {WriterNetworkPolicy, PolicyTypeInfrastructure, 1, func(a []string) string { return HCCAPIEgressPolicy(a[0]) }},
	"K8sAPIEgressPolicy": {WriterNetworkPolicy, PolicyTypeInfrastructure, 1, func(a []string) string { return K8sAPIEgressPolicy(a[0]) }},
	"HCCAPIIngressPolicy": {WriterNetworkPolicy, PolicyTypeInfrastructure, 0,
		func([]string) string { return HCCAPIIngressPolicy }},
	"ContextIngressPolicy": {WriterNetworkPolicy, PolicyTypeContextAllow, 2,
		func(a []string) string { return ContextIngressPolicy(a[0], a[1]) }},
	"ContextEgressPolicy": {WriterNetworkPolicy, PolicyTypeContextAllow, 2,
		func(a []string) string { return ContextEgressPolicy(a[0], a[1]) }},
	"RPCProxyEgressPolicy": {WriterNetworkPolicy, PolicyTypeRPCProxyEgress, 2,
		func(a []string) string { return RPCProxyEgressPolicy(a[0], a[1]) }},
	"ExternalEgressPolicy": {WriterNetworkPolicy, PolicyTypeExternalEgress, 2,
		func(a []string) string { return ExternalEgressPolicy(a[0], a[1]) }},
	"RecipeBindingEgressPolicy": {WriterNetworkPolicy, PolicyTypeRecipeBinding, 3,
		func(a []string) string { return RecipeBindingEgressPolicy(a[0], a[1], a[2]) }},
	"RecipeBindingIngressPolicy": {WriterNetworkPolicy, PolicyTypeRecipeBinding, 3,
		func(a []string) string { return RecipeBindingIngressPolicy(a[0], a[1], a[2]) }},
	"HostDesktopPolicy": {WriterHost, PolicyTypeHost, 1, func(a []string) string { return HostDesktopPolicy(a[0]) }},
	"ChannelReaderEgressPolicy": {WriterHost, PolicyTypeHost, 1,
		func(a []string) string { return ChannelReaderEgressPolicy(a[0]) }},
	"WFCIngressPolicy": {WriterFileSystem, PolicyTypeFileSystem, 1, func(a []string) string { return WFCIngressPolicy(a[0]) }},
	"WFCEgressPolicy":  {WriterFileSystem, PolicyTypeFileSystem, 1, func(a []string) string { return WFCEgressPolicy(a[0]) }},
	"GFSCEgressPolicy": {WriterFileSystem, PolicyTypeFileSystem, 1, func(a []string) string { return GFSCEgressPolicy(a[0]) }},
}

// adversarialParts are object names chosen to make one writer's name look
// like another's: other writers' prefixes and suffixes, bare words of their
// patterns, and lengths that make Fit shorten the result.
var adversarialParts = []string{
	"x",
	"x-egress",
	"x-ingress",
	"desktop",
	"rpc-proxy-desktop-x",
	"channel-reader-x",
	"wfc-x",
	"gfsc-x",
	"ctx-x",
	"deny-all-x",
	"host-context-controller-api",
	strings.Repeat("l", 63),
	strings.Repeat("y", 300) + "-egress",
}

// writersMatching returns the writers reserving name, with the type each
// implies.
func writersMatching(name string) map[PolicyWriter]string {
	out := map[PolicyWriter]string{}
	for _, w := range PolicyWriters() {
		if typ, ok := ReservedPolicyType(w, name); ok {
			out[w] = typ
		}
	}
	return out
}

// combinations returns every n-tuple of parts.
func combinations(parts []string, n int) [][]string {
	out := [][]string{{}}
	for range n {
		var next [][]string
		for _, prefix := range out {
			for _, p := range parts {
				next = append(next, append(slices.Clip(prefix), p))
			}
		}
		out = next
	}
	return out
}

func TestPolicyBuildersMatchOnlyTheirWriter(t *testing.T) {
	for ident, b := range policyBuilders {
		t.Run(ident, func(t *testing.T) {
			for _, args := range combinations(adversarialParts, b.args) {
				name := b.build(args)
				assert.Equal(t, map[PolicyWriter]string{b.writer: b.typ}, writersMatching(name),
					"%s(%q) = %q must be reserved by %s alone, as %s", ident, args, name, b.writer, b.typ)
			}
		})
	}
}

// TestEveryPolicyBuilderIsListed fails when a NetworkPolicy name builder (a
// function or constant of this package whose name ends in Policy) is added
// without a row in policyBuilders, so no builder escapes the tests above.
func TestEveryPolicyBuilderIsListed(t *testing.T) {
	var found []string
	for _, f := range parsePackage(t) {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() && strings.HasSuffix(d.Name.Name, "Policy") && returnsString(d) {
					found = append(found, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					// Untyped constants only: a typed one (WriterNetworkPolicy)
					// is no name.
					if vs, ok := spec.(*ast.ValueSpec); ok && d.Tok == token.CONST && vs.Type == nil {
						for _, n := range vs.Names {
							if n.IsExported() && strings.HasSuffix(n.Name, "Policy") {
								found = append(found, n.Name)
							}
						}
					}
				}
			}
		}
	}
	var listed []string
	for ident := range policyBuilders {
		listed = append(listed, ident)
	}
	slices.Sort(found)
	slices.Sort(listed)
	assert.Equal(t, found, listed, "policyBuilders must list every NetworkPolicy name builder of package names")
}

func returnsString(d *ast.FuncDecl) bool {
	r := d.Type.Results
	if r == nil || len(r.List) != 1 || len(r.List[0].Names) > 1 {
		return false
	}
	id, ok := r.List[0].Type.(*ast.Ident)
	return ok && id.Name == "string"
}

// TestPolicyTypesHaveOneWriter: every PolicyType constant is owned by
// exactly one writer, and a writer's patterns imply only its own types.
func TestPolicyTypesHaveOneWriter(t *testing.T) {
	var constants []string
	for _, f := range parsePackage(t) {
		for _, decl := range f.Decls {
			d, ok := decl.(*ast.GenDecl)
			if !ok || d.Tok != token.CONST {
				continue
			}
			for _, spec := range d.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "PolicyType") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					require.True(t, ok, "%s must be a string literal", n.Name)
					v, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					constants = append(constants, v)
				}
			}
		}
	}
	require.NotEmpty(t, constants)

	owners := map[string][]PolicyWriter{}
	for _, w := range policyWriters {
		for _, typ := range w.types {
			owners[typ] = append(owners[typ], w.writer)
		}
		for _, p := range w.patterns {
			assert.Contains(t, w.types, p.typ, "a pattern of %s implies %s, a type %s does not own", w.writer, p.typ, w.writer)
		}
		for _, typ := range w.types {
			assert.True(t, slices.ContainsFunc(w.patterns, func(p policyNamePattern) bool { return p.typ == typ }),
				"type %s of %s has no name pattern, so its repairable policies cannot be recognised", typ, w.writer)
		}
	}
	for _, typ := range constants {
		assert.Len(t, owners[typ], 1, "policy type %q must have exactly one writer, has %v", typ, owners[typ])
		w, ok := PolicyTypeWriter(typ)
		assert.True(t, ok)
		assert.Equal(t, owners[typ][0], w)
	}
	for typ := range owners {
		assert.Contains(t, constants, typ, "the table owns %q, which is no PolicyType constant", typ)
	}
	_, ok := PolicyTypeWriter("no-such-type")
	assert.False(t, ok)
	assert.Nil(t, WriterPolicyTypes("no-such-writer"))
}

// patternsOverlap reports whether some name matches both a and b. A pattern
// with a suffix also matches its Fit-shortened form (prefix, anything, hash),
// so two prefix patterns overlap as soon as one prefix starts the other,
// whatever their suffixes: both match the 253-byte shortened name with the
// longer prefix.
func patternsOverlap(a, b policyNamePattern) bool {
	switch {
	case a.exact != "" && b.exact != "":
		return a.exact == b.exact
	case a.exact != "":
		return b.matches(a.exact)
	case b.exact != "":
		return a.matches(b.exact)
	}
	return strings.HasPrefix(a.prefix, b.prefix) || strings.HasPrefix(b.prefix, a.prefix)
}

func TestPolicyNamePatternsDoNotOverlap(t *testing.T) {
	for i, a := range policyWriters {
		for _, b := range policyWriters[i+1:] {
			for _, pa := range a.patterns {
				for _, pb := range b.patterns {
					assert.False(t, patternsOverlap(pa, pb), "%s pattern %+v and %s pattern %+v reserve a common name", a.writer, pa, b.writer, pb)
				}
			}
		}
		// Within a writer, overlapping patterns of different types would
		// make the implied type depend on the table's order.
		for j, pa := range a.patterns {
			for _, pb := range a.patterns[j+1:] {
				if pa.typ != pb.typ {
					assert.False(t, patternsOverlap(pa, pb), "%s patterns %+v and %+v imply different types for a common name", a.writer, pa, pb)
				}
			}
		}
	}
}

// TestNoNameHasTwoWriters checks the matcher itself against the overlap
// rule: names built from every pattern's prefix with every pattern's suffix
// and adversarial middles, shortened or not, are reserved by at most one
// writer.
func TestNoNameHasTwoWriters(t *testing.T) {
	var prefixes, suffixes, exacts []string
	for _, w := range policyWriters {
		for _, p := range w.patterns {
			if p.exact != "" {
				exacts = append(exacts, p.exact)
				continue
			}
			prefixes = append(prefixes, p.prefix)
			suffixes = append(suffixes, p.suffix)
		}
	}
	names := slices.Clone(exacts)
	for _, pre := range prefixes {
		for _, suf := range append(suffixes, "-ingress", "-egress", "") {
			for _, mid := range adversarialParts {
				names = append(names, pre+mid+suf, Object(pre+mid+suf))
			}
		}
	}
	for _, name := range names {
		assert.LessOrEqual(t, len(writersMatching(name)), 1, "%q is reserved by %v", name, writersMatching(name))
	}
}

func TestReservedPolicyType(t *testing.T) {
	long := strings.Repeat("z", 300)
	tests := []struct {
		name   string
		policy string
		want   map[PolicyWriter]string
	}{
		{name: "a Host named x-egress keeps its channel-reader policy", policy: ChannelReaderEgressPolicy("x-egress"),
			want: map[PolicyWriter]string{WriterHost: PolicyTypeHost}},
		{name: "a server named desktop is the NetworkPolicy operator's", policy: ContextIngressPolicy("c", "desktop"),
			want: map[PolicyWriter]string{WriterNetworkPolicy: PolicyTypeContextAllow}},
		{name: "a Host named desktop is the Host operator's", policy: HostDesktopPolicy("desktop"),
			want: map[PolicyWriter]string{WriterHost: PolicyTypeHost}},
		{name: "a SharedFileSystem ingress", policy: "wfc-f1-ingress", want: map[PolicyWriter]string{WriterFileSystem: PolicyTypeFileSystem}},
		{name: "a GlobalFileSystem egress", policy: "gfsc-g1-egress", want: map[PolicyWriter]string{WriterFileSystem: PolicyTypeFileSystem}},
		{name: "a shortened channel-reader egress is still the Host operator's", policy: ChannelReaderEgressPolicy(long),
			want: map[PolicyWriter]string{WriterHost: PolicyTypeHost}},
		{name: "a shortened SharedFileSystem ingress is still the filesystem reconcilers'", policy: Object("wfc-" + long + "-ingress"),
			want: map[PolicyWriter]string{WriterFileSystem: PolicyTypeFileSystem}},
		{name: "a channel-reader name without the egress suffix is no one's", policy: "channel-reader-h1", want: map[PolicyWriter]string{}},
		{name: "a channel-reader egress without a Host is no one's", policy: "channel-reader--egress", want: map[PolicyWriter]string{}},
		{name: "a filesystem egress is the file-system reconcilers'", policy: "wfc-f1-egress", want: map[PolicyWriter]string{WriterFileSystem: PolicyTypeFileSystem}},
		{name: "a filesystem name with another suffix is no one's", policy: "wfc-f1-data", want: map[PolicyWriter]string{}},
		{name: "a long channel-reader name not ending in a hash is no one's",
			policy: ("channel-reader-" + long)[:MaxObjectName], want: map[PolicyWriter]string{}},
		{name: "a bare prefix is no one's", policy: "allow-rpc-proxy-desktop-", want: map[PolicyWriter]string{}},
		{name: "an unrelated allow- policy is no one's", policy: "allow-everything", want: map[PolicyWriter]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, writersMatching(tc.policy))
		})
	}
}

// TestNetPolReservedType pins the behaviour pkg/controllers/netpol relies on
// for the repairable class.
func TestNetPolReservedType(t *testing.T) {
	tests := []struct {
		policy string
		typ    string
		ok     bool
	}{
		{"deny-all-mcp-server", PolicyTypeDenyAll, true},
		{"allow-dns-egress-mcp-host", PolicyTypeInfrastructure, true},
		{"allow-hcc-api-egress-sandbox", PolicyTypeInfrastructure, true},
		{"allow-k8s-api-egress-mcp-host", PolicyTypeInfrastructure, true},
		{"allow-host-context-controller-api", PolicyTypeInfrastructure, true},
		{"ctx-c1-s1", PolicyTypeContextAllow, true},
		{"ctx-c1-s1-egress", PolicyTypeContextAllow, true},
		{"rpc-egress-c1-s1", PolicyTypeRPCProxyEgress, true},
		{"ext-egress-s1-api", PolicyTypeExternalEgress, true},
		{"bind-r-s1-w-ingress", PolicyTypeRecipeBinding, true},
		{"deny-all-", "", false},
		{"ctx-", "", false},
		{"allow-host-context-controller-api-x", "", false},
		{"allow-rpc-proxy-desktop-h1", "", false},
		{"channel-reader-h1-egress", "", false},
		{"wfc-f1-ingress", "", false},
		{"", "", false},
	}
	for _, tc := range tests {
		typ, ok := NetPolReservedType(tc.policy)
		assert.Equal(t, tc.ok, ok, tc.policy)
		assert.Equal(t, tc.typ, typ, tc.policy)
	}
}

// parsePackage parses the non-test files of this package.
func parsePackage(t *testing.T) []*ast.File {
	t.Helper()
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		require.NoError(t, err)
		files = append(files, f)
	}
	return files
}
