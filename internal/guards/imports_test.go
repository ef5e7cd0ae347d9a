package guards

import (
	"bufio"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// module is this module's path; TestModuleImports checks go.mod agrees, so
// a rename cannot leave every rule matching nothing.
const module = "github.com/clerum/hcc"

// The import graph is read with go/parser rather than go/packages or
// `go list -deps`: it needs no go command, no network and no build, so the
// guard takes well under a second. Two choices follow from that:
//   - every non-test file counts whatever its build constraints say, since a
//     forbidden import behind a tag is still forbidden;
//   - transitive rules follow this module's packages only. An external
//     module importing client-go on a package's behalf is not seen; the
//     layering rules are about this module's packages, and those are seen.
//
// Test files are not checked: a test may reach for a fake clientset or a
// controller to build fixtures without changing what the package is.

// importGraph is the module's packages, each with its non-test files.
type importGraph struct {
	packages map[string]*goPackage // by import path
}

type goPackage struct {
	path  string
	files []goFile // sorted by name
}

type goFile struct {
	name    string   // slash path relative to the module root
	imports []string // sorted
}

// importRule is one layering rule. Exactly one of fromPackage and fromFile
// selects what it holds for.
type importRule struct {
	name        string                // the rule, as a violation quotes it
	fromPackage func(pkg string) bool // every non-test file of these packages
	fromFile    func(file string) bool
	forbidden   func(imp string) bool
	// transitive also follows imports of this module's packages, so that
	// pkg/api -> pkg/render -> pkg/controllers/egress counts as pkg/api
	// importing a controller.
	transitive bool
}

// violation is one forbidden import reached from one package or file.
type violation struct {
	rule  string
	from  string   // the package (import path) or file (module-relative)
	file  string   // the file holding the first import of chain
	chain []string // import paths from from's import to the forbidden one
}

func (v violation) String() string {
	return fmt.Sprintf("%s: %s imports %s (rule: %s)", v.file, v.from, strings.Join(v.chain, " -> "), v.rule)
}

// pathIn reports whether imp is pkg or a package below it.
func pathIn(imp string, pkgs ...string) bool {
	for _, p := range pkgs {
		if imp == p || strings.HasPrefix(imp, p+"/") {
			return true
		}
	}
	return false
}

// layeringRules are the rules of issue 8 item 7 for module mod.
func layeringRules(mod string) []importRule {
	var (
		api         = mod + "/pkg/api"
		apis        = mod + "/pkg/apis"
		controllers = mod + "/pkg/controllers"
		planner     = mod + "/pkg/netpol"
		config      = mod + "/pkg/config"
		clientGo    = "k8s.io/client-go"
	)
	// Clientsets and listers: what a pure builder must not be able to reach
	// for, since it takes objects and returns objects.
	clients := func(imp string) bool {
		return pathIn(imp,
			clientGo+"/kubernetes",
			clientGo+"/listers",
			mod+"/pkg/generated/clientset",
			mod+"/pkg/generated/listers")
	}
	return []importRule{
		{
			name:        "pkg/api (HTTP handlers, no client writes) must not import the controllers or the planner",
			fromPackage: func(p string) bool { return pathIn(p, api) },
			forbidden:   func(imp string) bool { return pathIn(imp, controllers, planner) },
			transitive:  true,
		},
		{
			name:        "pkg/netpol (pure policy planning) must not import client-go or pkg/config",
			fromPackage: func(p string) bool { return pathIn(p, planner) },
			forbidden:   func(imp string) bool { return pathIn(imp, clientGo, config) },
			transitive:  true,
		},
		{
			name:        "pkg/apis must not import any other package of this module",
			fromPackage: func(p string) bool { return pathIn(p, apis) },
			forbidden:   func(imp string) bool { return pathIn(imp, mod) && !pathIn(imp, apis) },
			transitive:  true,
		},
		{
			name:        "pkg/netpol (pure policy planning) must not import clientsets or listers",
			fromPackage: func(p string) bool { return pathIn(p, planner) },
			forbidden:   clients,
			transitive:  true,
		},
		{
			// File level and direct only: the package around a builder
			// holds the I/O, and a helper package it shares (the kit) may
			// well import client-go for the loop.
			name: "pure builders (pkg/controllers/*/resources.go) must not import clientsets or listers",
			fromFile: func(f string) bool {
				return strings.HasPrefix(f, "pkg/controllers/") && path.Base(f) == "resources.go"
			},
			forbidden: clients,
		},
	}
}

// renderRules are the rules of issue 18 for module mod: `hcc-controller
// render` links no informer or clientset, so pkg/render reaches the
// controllers only through their pure subpackages, and those stay pure.
func renderRules(mod string) []importRule {
	var (
		render      = mod + "/pkg/render"
		controllers = mod + "/pkg/controllers"
		generated   = mod + "/pkg/generated"
		clientGo    = "k8s.io/client-go"
	)
	// pure reports whether p is a pure subpackage of a controller: the
	// builders of pkg/controllers/<r>/resources, or a piece of a controller
	// that render shares. Nothing below them is: a package earns the name
	// by being listed here, not by sitting under one that is.
	pure := func(p string) bool {
		if ok, _ := path.Match(controllers+"/*/resources", p); ok {
			return true
		}
		return p == controllers+"/egress/resolve" || p == controllers+"/netpol/planopts"
	}
	// controller reports a package of pkg/controllers that is not pure: a
	// reconciler, the kit, or anything below them.
	controller := func(imp string) bool { return pathIn(imp, controllers) && !pure(imp) }
	return []importRule{
		{
			name:        "pkg/render imports no controller package, only their pure subpackages and pkg/netpol",
			fromPackage: func(p string) bool { return pathIn(p, render) },
			forbidden:   controller,
			transitive:  true,
		},
		{
			name:        "pkg/render (the offline plan) must not import client-go",
			fromPackage: func(p string) bool { return pathIn(p, render) },
			forbidden:   func(imp string) bool { return pathIn(imp, clientGo) },
			transitive:  true,
		},
		{
			// A pure subpackage importing its parent would be an import
			// cycle once the parent uses it; the rule says so before the
			// compiler does, and covers every other controller and the kit.
			name:        "the controllers' pure subpackages (pkg/controllers/*/resources, egress/resolve, netpol/planopts) must not import client-go, pkg/generated or a controller package (their parent, another, the kit)",
			fromPackage: pure,
			forbidden:   func(imp string) bool { return pathIn(imp, clientGo, generated) || controller(imp) },
			transitive:  true,
		},
	}
}

// check returns every violation of rules in g, in a stable order: per rule,
// per package or file, each forbidden import once, by its shortest chain.
func check(g *importGraph, rules []importRule) []violation {
	paths := make([]string, 0, len(g.packages))
	for p := range g.packages {
		paths = append(paths, p)
	}
	slices.Sort(paths)

	var out []violation
	for _, r := range rules {
		for _, p := range paths {
			pkg := g.packages[p]
			if r.fromPackage != nil && r.fromPackage(p) {
				out = append(out, reach(g, r, p, pkg.files)...)
			}
			if r.fromFile != nil {
				for _, f := range pkg.files {
					if r.fromFile(f.name) {
						out = append(out, reach(g, r, f.name, []goFile{f})...)
					}
				}
			}
		}
	}
	return out
}

// reach walks the imports of files breadth first, so each forbidden import
// is reported with its shortest chain.
func reach(g *importGraph, r importRule, from string, files []goFile) []violation {
	type step struct {
		file  string
		chain []string
	}
	var queue []step
	seen := map[string]bool{}
	for _, f := range files {
		for _, imp := range f.imports {
			if !seen[imp] {
				seen[imp] = true
				queue = append(queue, step{file: f.name, chain: []string{imp}})
			}
		}
	}
	var out []violation
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		imp := s.chain[len(s.chain)-1]
		if r.forbidden(imp) {
			out = append(out, violation{rule: r.name, from: from, file: s.file, chain: s.chain})
			continue
		}
		next, internal := g.packages[imp]
		if !r.transitive || !internal {
			continue
		}
		for _, f := range next.files {
			for _, i := range f.imports {
				if !seen[i] {
					seen[i] = true
					queue = append(queue, step{file: s.file, chain: append(slices.Clip(s.chain), i)})
				}
			}
		}
	}
	return out
}

// loadGraph parses the imports of every non-test Go file of module mod
// rooted at root. Hidden and underscore directories, testdata, vendor and
// nested modules (hack/controlplane) are not part of the module's packages.
func loadGraph(root, mod string) (*importGraph, error) {
	g := &importGraph{packages: map[string]*goPackage{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			if rel != "." {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		file := goFile{name: rel}
		for _, spec := range f.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: import %s: %w", rel, spec.Path.Value, err)
			}
			file.imports = append(file.imports, imp)
		}
		slices.Sort(file.imports)
		file.imports = slices.Compact(file.imports)

		pkgPath := mod
		if dir := path.Dir(rel); dir != "." {
			pkgPath = mod + "/" + dir
		}
		pkg := g.packages[pkgPath]
		if pkg == nil {
			pkg = &goPackage{path: pkgPath}
			g.packages[pkgPath] = pkg
		}
		pkg.files = append(pkg.files, file) // WalkDir visits names in order
		return nil
	})
	return g, err
}

// moduleRoot finds the directory of the go.mod above the test's working
// directory and returns it with the module path go.mod declares.
func moduleRoot(t *testing.T) (root, mod string) {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		f, err := os.Open(filepath.Join(dir, "go.mod"))
		if err == nil {
			defer f.Close()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
					return dir, strings.Trim(strings.TrimSpace(rest), `"`)
				}
			}
			require.NoError(t, sc.Err())
			t.Fatalf("%s/go.mod has no module line", dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// TestModuleImports is the guard: every violation of the layering rules in
// this module's sources, one error each.
func TestModuleImports(t *testing.T) {
	root, mod := moduleRoot(t)
	require.Equal(t, module, mod, "go.mod declares another module path; update the guard")

	g, err := loadGraph(root, mod)
	require.NoError(t, err)

	rules := append(layeringRules(mod), renderRules(mod)...)
	// A rule whose packages moved away would pass forever; the package
	// rules must each hold for something. (resources.go files arrive with
	// the reconcilers; that rule may select none yet.)
	for _, r := range rules {
		if r.fromPackage == nil {
			continue
		}
		selected := 0
		for p := range g.packages {
			if r.fromPackage(p) {
				selected++
			}
		}
		assert.NotZero(t, selected, "rule %q selects no package", r.name)
	}

	for _, v := range check(g, rules) {
		t.Error(v)
	}
}

// TestCheckCatchesViolations proves the checker on a synthetic graph: each
// rule fires, transitively where it should, at package and file level, and
// a neighbour sharing a name prefix (pkg/apiserver, pkg/apis) is not taken
// for the package a rule is about.
func TestCheckCatchesViolations(t *testing.T) {
	const m = "example.com/m"
	pkg := func(p string, files ...goFile) *goPackage { return &goPackage{path: m + "/" + p, files: files} }
	file := func(name string, imports ...string) goFile { return goFile{name: name, imports: imports} }
	g := &importGraph{packages: map[string]*goPackage{}}
	for _, p := range []*goPackage{
		pkg("pkg/api",
			file("pkg/api/server.go", m+"/pkg/render", "net/http"),
			file("pkg/api/plan.go", m+"/pkg/netpol/sub")),
		pkg("pkg/render", file("pkg/render/render.go", m+"/pkg/controllers/egress")),
		pkg("pkg/controllers/egress",
			file("pkg/controllers/egress/controller.go", "k8s.io/client-go/kubernetes"),
			file("pkg/controllers/egress/resources.go", "k8s.io/api/core/v1", m+"/pkg/generated/clientset/versioned")),
		pkg("pkg/controllers/netpol",
			file("pkg/controllers/netpol/resources.go", "k8s.io/client-go/listers/core/v1")),
		pkg("pkg/apiserver", file("pkg/apiserver/x.go", m+"/pkg/controllers/egress")),
		pkg("pkg/netpol",
			file("pkg/netpol/types.go", m+"/pkg/config"),
			file("pkg/netpol/plan.go", m+"/pkg/kube", m+"/pkg/names")),
		pkg("pkg/netpol/sub", file("pkg/netpol/sub/sub.go")),
		pkg("pkg/kube", file("pkg/kube/kube.go", "k8s.io/client-go/kubernetes")),
		pkg("pkg/names", file("pkg/names/names.go", "strings")),
		pkg("pkg/apis/g/v1",
			file("pkg/apis/g/v1/types.go", m+"/pkg/apis/g/shared", m+"/pkg/names", "k8s.io/apimachinery/pkg/runtime")),
		pkg("pkg/apis/g/shared", file("pkg/apis/g/shared/shared.go", m+"/pkg/controllers/egress")),
	} {
		g.packages[p.path] = p
	}

	var got []string
	for _, v := range check(g, layeringRules(m)) {
		got = append(got, fmt.Sprintf("%s | %s | %s", v.file, v.from, strings.Join(v.chain, " -> ")))
	}
	assert.Equal(t, []string{
		// pkg/api: the planner directly, a controller through pkg/render.
		"pkg/api/plan.go | example.com/m/pkg/api | example.com/m/pkg/netpol/sub",
		"pkg/api/server.go | example.com/m/pkg/api | example.com/m/pkg/render -> example.com/m/pkg/controllers/egress",
		// pkg/netpol: config directly, client-go through pkg/kube.
		"pkg/netpol/types.go | example.com/m/pkg/netpol | example.com/m/pkg/config",
		"pkg/netpol/plan.go | example.com/m/pkg/netpol | example.com/m/pkg/kube -> k8s.io/client-go/kubernetes",
		// pkg/apis: another package of the module, directly and through a
		// package of pkg/apis itself.
		"pkg/apis/g/shared/shared.go | example.com/m/pkg/apis/g/shared | example.com/m/pkg/controllers/egress",
		"pkg/apis/g/v1/types.go | example.com/m/pkg/apis/g/v1 | example.com/m/pkg/names",
		"pkg/apis/g/v1/types.go | example.com/m/pkg/apis/g/v1 | example.com/m/pkg/apis/g/shared -> example.com/m/pkg/controllers/egress",
		// The planner's clientset rule, through pkg/kube.
		"pkg/netpol/plan.go | example.com/m/pkg/netpol | example.com/m/pkg/kube -> k8s.io/client-go/kubernetes",
		// Pure builders, per file; controller.go beside them may import clients.
		"pkg/controllers/egress/resources.go | pkg/controllers/egress/resources.go | example.com/m/pkg/generated/clientset/versioned",
		"pkg/controllers/netpol/resources.go | pkg/controllers/netpol/resources.go | k8s.io/client-go/listers/core/v1",
	}, got)

	clean := &importGraph{packages: map[string]*goPackage{
		m + "/pkg/api":    pkg("pkg/api", file("pkg/api/server.go", m+"/pkg/config", "k8s.io/client-go/listers/core/v1")),
		m + "/pkg/netpol": pkg("pkg/netpol", file("pkg/netpol/plan.go", m+"/pkg/names", m+"/pkg/apis/g/v1")),
	}}
	assert.Empty(t, check(clean, layeringRules(m)), "allowed imports are not violations")
}

// TestCheckCatchesRenderViolations proves the rules of issue 18 on a
// synthetic graph: pkg/render may import the pure subpackages but no other
// controller package, directly or through one of them; nothing it reaches
// may import client-go; a pure subpackage imports neither client-go,
// pkg/generated, the kit nor its parent; and only the listed packages are
// pure (not pkg/controllers/x/sub/resources, not resourcesx).
func TestCheckCatchesRenderViolations(t *testing.T) {
	const m = "example.com/m"
	c := m + "/pkg/controllers"
	pkg := func(p string, files ...goFile) *goPackage { return &goPackage{path: m + "/" + p, files: files} }
	file := func(name string, imports ...string) goFile { return goFile{name: name, imports: imports} }
	g := &importGraph{packages: map[string]*goPackage{}}
	for _, p := range []*goPackage{
		pkg("pkg/render",
			file("pkg/render/load.go", c+"/sharedfs/resourcesx", c+"/sharedfs/sub/resources", m+"/pkg/kube"),
			file("pkg/render/render.go", c+"/egress/resolve", c+"/netpol/planopts", c+"/mcpserver/resources", m+"/pkg/netpol", c+"/host")),
		pkg("pkg/controllers/egress/resolve", file("pkg/controllers/egress/resolve/resolve.go", c+"/egress", m+"/pkg/netpol")),
		pkg("pkg/controllers/netpol/planopts", file("pkg/controllers/netpol/planopts/planopts.go", m+"/pkg/config", m+"/pkg/generated/listers/x")),
		pkg("pkg/controllers/mcpserver/resources", file("pkg/controllers/mcpserver/resources/build.go", c+"/host/resources", c+"/kit")),
		pkg("pkg/controllers/host/resources", file("pkg/controllers/host/resources/build.go", m+"/pkg/kube")),
		pkg("pkg/controllers/egress", file("pkg/controllers/egress/coordinator.go", "k8s.io/client-go/tools/cache")),
		pkg("pkg/renderer", file("pkg/renderer/x.go", c+"/egress", "k8s.io/client-go/kubernetes")),
		pkg("pkg/netpol", file("pkg/netpol/plan.go", m+"/pkg/names")),
		pkg("pkg/kube", file("pkg/kube/kube.go", "k8s.io/client-go/kubernetes")),
	} {
		g.packages[p.path] = p
	}

	var got []string
	for _, v := range check(g, renderRules(m)) {
		got = append(got, fmt.Sprintf("%s | %s | %s", v.file, v.from, strings.Join(v.chain, " -> ")))
	}
	assert.Equal(t, []string{
		// pkg/render and controllers: a parent directly, packages that only
		// look pure, and the kit and a parent through pure subpackages.
		"pkg/render/load.go | example.com/m/pkg/render | example.com/m/pkg/controllers/sharedfs/resourcesx",
		"pkg/render/load.go | example.com/m/pkg/render | example.com/m/pkg/controllers/sharedfs/sub/resources",
		"pkg/render/render.go | example.com/m/pkg/render | example.com/m/pkg/controllers/host",
		"pkg/render/render.go | example.com/m/pkg/render | example.com/m/pkg/controllers/egress/resolve -> example.com/m/pkg/controllers/egress",
		"pkg/render/render.go | example.com/m/pkg/render | example.com/m/pkg/controllers/mcpserver/resources -> example.com/m/pkg/controllers/kit",
		// pkg/render and client-go: through this module's packages, pure
		// ones included.
		"pkg/render/load.go | example.com/m/pkg/render | example.com/m/pkg/kube -> k8s.io/client-go/kubernetes",
		"pkg/render/render.go | example.com/m/pkg/render | example.com/m/pkg/controllers/egress/resolve -> example.com/m/pkg/controllers/egress -> k8s.io/client-go/tools/cache",
		// The pure subpackages: the parent, pkg/generated, the kit, and
		// client-go through another package of the module.
		"pkg/controllers/egress/resolve/resolve.go | example.com/m/pkg/controllers/egress/resolve | example.com/m/pkg/controllers/egress",
		"pkg/controllers/host/resources/build.go | example.com/m/pkg/controllers/host/resources | example.com/m/pkg/kube -> k8s.io/client-go/kubernetes",
		"pkg/controllers/mcpserver/resources/build.go | example.com/m/pkg/controllers/mcpserver/resources | example.com/m/pkg/controllers/kit",
		"pkg/controllers/mcpserver/resources/build.go | example.com/m/pkg/controllers/mcpserver/resources | example.com/m/pkg/controllers/host/resources -> example.com/m/pkg/kube -> k8s.io/client-go/kubernetes",
		"pkg/controllers/netpol/planopts/planopts.go | example.com/m/pkg/controllers/netpol/planopts | example.com/m/pkg/generated/listers/x",
	}, got)

	clean := &importGraph{packages: map[string]*goPackage{
		m + "/pkg/render": pkg("pkg/render", file("pkg/render/render.go",
			c+"/egress/resolve", c+"/netpol/planopts", c+"/mcpserver/resources", m+"/pkg/netpol", m+"/pkg/config", "k8s.io/apimachinery/pkg/runtime")),
		c + "/mcpserver/resources": pkg("pkg/controllers/mcpserver/resources", file("pkg/controllers/mcpserver/resources/build.go",
			c+"/host/resources", m+"/pkg/reasons", "k8s.io/api/core/v1")),
	}}
	assert.Empty(t, check(clean, renderRules(m)), "allowed imports are not violations")
}

// TestLoadGraph proves the loader on a scratch tree: test files, testdata,
// hidden directories and nested modules are left out, and a file's imports
// count whatever its build constraints.
func TestLoadGraph(t *testing.T) {
	root := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	write("go.mod", "module example.com/m\n")
	write("main.go", "package main\nimport _ \"example.com/m/pkg/a\"\n")
	write("pkg/a/a.go", "package a\nimport (\n\t\"fmt\"\n\tb \"example.com/m/pkg/b\"\n)\n")
	write("pkg/a/a_other.go", "//go:build !linux\n\npackage a\nimport \"os\"\n")
	write("pkg/a/a_test.go", "package a\nimport \"k8s.io/client-go/kubernetes\"\n")
	write("pkg/a/testdata/x.go", "package x\nimport \"k8s.io/client-go/kubernetes\"\n")
	write("pkg/.hidden/h.go", "package h\n")
	write("tools/go.mod", "module example.com/tools\n")
	write("tools/t.go", "package t\n")

	g, err := loadGraph(root, "example.com/m")
	require.NoError(t, err)
	got := map[string][]goFile{}
	for p, pkg := range g.packages {
		got[p] = pkg.files
	}
	assert.Equal(t, map[string][]goFile{
		"example.com/m": {{name: "main.go", imports: []string{"example.com/m/pkg/a"}}},
		"example.com/m/pkg/a": {
			{name: "pkg/a/a.go", imports: []string{"example.com/m/pkg/b", "fmt"}},
			{name: "pkg/a/a_other.go", imports: []string{"os"}},
		},
	}, got)
}
