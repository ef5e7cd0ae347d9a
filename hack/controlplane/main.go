// Command controlplane builds and caches the local control-plane binaries
// (etcd, kube-apiserver, ...) that integration and end-to-end tests run.
//
// Usage (from hack/controlplane):
//
//	go run . ensure [--components etcd,kube-apiserver]
//	go run . path   [--components etcd,kube-apiserver]
//
// Both print one line on stdout: the absolute directory holding the
// requested binaries. ensure builds whatever is missing first; path fails if
// anything is missing. Progress and errors go to stderr.
//
// The binaries are built from source with the local Go toolchain because the
// only network reachable here is the Go module proxy. Each source lives in a
// generated Go module under the cache directory, never inside the repository.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Versions of the upstream sources. Changing one changes the cache key, so
// binaries of the old and the new version never mix.
const (
	kubernetesVersion = "v1.37.2"
	// stagingVersion is the release of the k8s.io/* staging modules
	// (k8s.io/api, k8s.io/apiserver, ...) cut together with kubernetesVersion.
	stagingVersion = "v0.37.2"
	etcdVersion    = "v3.7.3"
	kwokVersion    = "v0.8.0"
	// kubeRouterVersion is the NetworkPolicy implementation of the
	// dataplane tests (docs/local-cluster.md#the-dataplane): test-only,
	// never shipped. It is the only version the module proxy here serves,
	// and it has reported security flaws that do not matter inside a
	// throwaway network namespace (docs/local-cluster.md, "kube-router:
	// test-only").
	kubeRouterVersion = "v2.1.0"
)

const (
	heartbeatInterval = 20 * time.Second
	// failureTailLines is how much of the go command's output is shown when
	// it fails.
	failureTailLines = 40
)

var defaultComponents = []string{"etcd", "kube-apiserver"}

// sourceModule is a generated Go module from which some components are built.
type sourceModule struct {
	// name is the module's directory under <cache>/controlplane/src.
	name string
	// generate writes the module's go.mod and Go files into dir; pkgs are
	// the main packages that will be built from it.
	generate func(ctx context.Context, dir string, pkgs []string) error
	// ldflags are added to the linker flags, e.g. -X version stamps.
	ldflags []string
	// files, when set, returns data files to install next to the binaries
	// (name → content), read from the module's dependencies in srcDir.
	files func(ctx context.Context, srcDir string) (map[string]string, error)
}

type component struct {
	name   string // binary name
	pkg    string // main package built from module
	module *sourceModule
	// files are the data files of module.files this component needs.
	files []string
	// version, when set, is written next to the binary as NAME.version
	// and must match for the binary to count as built: a component whose
	// version is not part of the directory's cache key (binDir) is still
	// rebuilt when its version changes.
	version string
}

var (
	etcdModule = &sourceModule{
		name:     "etcd-" + etcdVersion,
		generate: generateEtcd,
	}
	kubernetesModule = &sourceModule{
		name:     "kubernetes-" + kubernetesVersion,
		generate: generateKubernetes,
		ldflags:  kubernetesVersionLdflags(),
	}
	kwokModule = &sourceModule{
		name:     "kwok-" + kwokVersion,
		generate: generateKwok,
		files:    kwokStages,
	}
	kubeRouterModule = &sourceModule{
		name:     "kube-router-" + kubeRouterVersion,
		generate: generateKubeRouter,
	}
)

// components lists everything this tool can build, in build order.
var components = []component{
	{name: "etcd", pkg: "hcc.local/controlplane/etcd", module: etcdModule},
	{name: "kube-apiserver", pkg: "k8s.io/kubernetes/cmd/kube-apiserver", module: kubernetesModule},
	{name: "kube-controller-manager", pkg: "k8s.io/kubernetes/cmd/kube-controller-manager", module: kubernetesModule},
	{name: "kube-scheduler", pkg: "k8s.io/kubernetes/cmd/kube-scheduler", module: kubernetesModule},
	{name: "kwok", pkg: "sigs.k8s.io/kwok/cmd/kwok", module: kwokModule, files: []string{kwokStagesFile}},
	// kube-router's own version is not in binDir's key: adding it there
	// would rebuild every other binary for a component only the dataplane
	// tests use. Its version stamp stands in.
	{name: "kube-router", pkg: "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router", module: kubeRouterModule, version: kubeRouterVersion},
}

func main() {
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "controlplane: "+format+"\n", args...)
	}
	if len(os.Args) < 2 {
		usage()
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	list := fs.String("components", strings.Join(defaultComponents, ","),
		"comma-separated components: "+strings.Join(componentNames(), ","))
	_ = fs.Parse(os.Args[2:])

	selected, err := selectComponents(*list)
	if err != nil {
		logf("error: %v", err)
		os.Exit(2)
	}
	root, err := cacheRoot()
	if err != nil {
		logf("error: %v", err)
		os.Exit(1)
	}
	c := &cache{root: root, log: logf}

	switch cmd {
	case "path":
		if missing := c.missing(selected); len(missing) > 0 {
			logf("error: not built yet: %s (run: go run . ensure --components %s)",
				strings.Join(missing, ","), *list)
			os.Exit(1)
		}
	case "ensure":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := c.ensure(ctx, selected)
		stop()
		if err != nil {
			logf("error: %v", err)
			os.Exit(1)
		}
	default:
		usage()
	}
	fmt.Println(c.binDir())
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: go run . ensure|path [--components "+strings.Join(defaultComponents, ",")+"]")
	os.Exit(2)
}

func componentNames() []string {
	names := make([]string, len(components))
	for i, c := range components {
		names[i] = c.name
	}
	return names
}

// selectComponents parses the --components list, keeping the build order of
// the components table.
func selectComponents(list string) ([]component, error) {
	want := map[string]bool{}
	for name := range strings.SplitSeq(list, ",") {
		if name = strings.TrimSpace(name); name != "" {
			want[name] = true
		}
	}
	var selected []component
	for _, c := range components {
		if want[c.name] {
			selected = append(selected, c)
			delete(want, c.name)
		}
	}
	for name := range want {
		return nil, fmt.Errorf("unknown component %q (known: %s)", name, strings.Join(componentNames(), ","))
	}
	if len(selected) == 0 {
		return nil, errors.New("no components requested")
	}
	return selected, nil
}

// cacheRoot returns $HCC_CACHE_DIR, else $XDG_CACHE_HOME/hcc, else
// $HOME/.cache/hcc.
func cacheRoot() (string, error) {
	dir := os.Getenv("HCC_CACHE_DIR")
	if dir == "" {
		if xdg := os.Getenv("XDG_CACHE_HOME"); xdg != "" {
			dir = filepath.Join(xdg, "hcc")
		} else {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("no cache directory: set HCC_CACHE_DIR: %w", err)
			}
			dir = filepath.Join(home, ".cache", "hcc")
		}
	}
	return filepath.Abs(dir)
}

type cache struct {
	root string
	log  func(format string, args ...any)
}

func (c *cache) dir() string { return filepath.Join(c.root, "controlplane") }

// binDir holds the binaries of one set of versions.
func (c *cache) binDir() string {
	key := fmt.Sprintf("k8s-%s_etcd-%s_kwok-%s", kubernetesVersion, etcdVersion, kwokVersion)
	return filepath.Join(c.dir(), "bin-"+key)
}

func (c *cache) srcDir(m *sourceModule) string { return filepath.Join(c.dir(), "src", m.name) }

// missing returns the names of the selected components not yet in binDir.
func (c *cache) missing(selected []component) []string {
	var names []string
	for _, comp := range selected {
		if !c.built(comp) {
			names = append(names, comp.name)
		}
	}
	return names
}

// built reports whether comp's binary, its data files and, for a versioned
// component, a matching version stamp are all in binDir.
func (c *cache) built(comp component) bool {
	for _, file := range append([]string{comp.name}, comp.files...) {
		if info, err := os.Stat(filepath.Join(c.binDir(), file)); err != nil || !info.Mode().IsRegular() {
			return false
		}
	}
	if comp.version == "" {
		return true
	}
	stamp, err := os.ReadFile(filepath.Join(c.binDir(), comp.versionFile()))
	return err == nil && strings.TrimSpace(string(stamp)) == comp.version
}

// versionFile is the name of comp's version stamp.
func (comp component) versionFile() string { return comp.name + ".version" }

// ensure builds the missing selected components. Binaries only ever appear
// in binDir through an atomic rename, so a present binary is a complete one
// and the all-cached case needs neither the lock nor the go command.
func (c *cache) ensure(ctx context.Context, selected []component) error {
	if len(c.missing(selected)) == 0 {
		return nil
	}
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer unlock()

	// Another ensure may have built some while we waited for the lock.
	todo := c.missing(selected)
	if len(todo) == 0 {
		return nil
	}
	if err := os.MkdirAll(c.binDir(), 0o755); err != nil {
		return err
	}
	c.removeStaleTemp()

	start := time.Now()
	for _, m := range modulesOf(selected, todo) {
		srcDir, err := c.prepareSource(ctx, m)
		if err != nil {
			return err
		}
		if err := c.build(ctx, srcDir, m, componentsOf(selected, todo, m)); err != nil {
			return err
		}
	}
	c.log("built %s in %s; binaries in %s", strings.Join(todo, ","), since(start), c.binDir())
	return nil
}

// lock takes an exclusive lock on the cache so that concurrent ensure runs
// build each thing once instead of clobbering each other's work.
func (c *cache) lock() (unlock func(), err error) {
	if err := os.MkdirAll(c.dir(), 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(c.dir(), "lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		c.log("waiting for another ensure to finish (lock %s)", path)
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
	}
	// Closing the file releases the lock.
	return func() { f.Close() }, nil
}

// removeStaleTemp deletes what interrupted runs left behind. It runs under
// the lock, so no other run is using these.
func (c *cache) removeStaleTemp() {
	for _, dir := range []string{c.binDir(), filepath.Join(c.dir(), "src")} {
		stale, _ := filepath.Glob(filepath.Join(dir, ".tmp-*"))
		for _, path := range stale {
			os.RemoveAll(path)
		}
	}
}

// modulesOf returns the source modules of the components named in todo, in
// build order.
func modulesOf(selected []component, todo []string) []*sourceModule {
	var mods []*sourceModule
	for _, comp := range selected {
		if slices.Contains(todo, comp.name) && !slices.Contains(mods, comp.module) {
			mods = append(mods, comp.module)
		}
	}
	return mods
}

// packages returns the main packages of all components built from m, so
// that the module is generated once for all of them.
func (m *sourceModule) packages() []string {
	var pkgs []string
	for _, comp := range components {
		if comp.module == m {
			pkgs = append(pkgs, comp.pkg)
		}
	}
	return pkgs
}

func componentsOf(selected []component, todo []string, m *sourceModule) []component {
	var comps []component
	for _, comp := range selected {
		if comp.module == m && slices.Contains(todo, comp.name) {
			comps = append(comps, comp)
		}
	}
	return comps
}

// prepareSource returns the directory of m's generated module, generating
// it and resolving its dependencies (go mod tidy) on first use. The module
// is prepared in a temporary directory and renamed into place, so an
// existing directory is always a complete one.
func (c *cache) prepareSource(ctx context.Context, m *sourceModule) (string, error) {
	dir := c.srcDir(m)
	if _, err := os.Stat(filepath.Join(dir, "go.sum")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".tmp-"+m.name+"-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp makes it private
		return "", err
	}

	c.log("generating source module %s in %s", m.name, dir)
	if err := m.generate(ctx, tmp, m.packages()); err != nil {
		return "", fmt.Errorf("generate %s: %w", m.name, err)
	}
	if err := c.runGo(ctx, tmp, "resolving dependencies of "+m.name, "modules downloaded", "mod", "tidy"); err != nil {
		return "", err
	}
	os.RemoveAll(dir) // an incomplete leftover without go.sum
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return dir, nil
}

// build compiles comps (all from the module in srcDir) into a temporary
// directory next to binDir and then renames each binary into binDir, so an
// interrupted build never leaves a partial binary under its final name.
func (c *cache) build(ctx context.Context, srcDir string, m *sourceModule, comps []component) error {
	tmp, err := os.MkdirTemp(c.binDir(), ".tmp-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	names := make([]string, len(comps))
	ldflags := strings.Join(append([]string{"-s", "-w"}, m.ldflags...), " ")
	args := []string{"build", "-v", "-trimpath", "-ldflags=" + ldflags, "-o", tmp + string(filepath.Separator)}
	for i, comp := range comps {
		names[i] = comp.name
		args = append(args, comp.pkg)
	}
	if err := c.runGo(ctx, srcDir, "building "+strings.Join(names, ","), "packages compiled", args...); err != nil {
		return err
	}
	for _, comp := range comps {
		// go build names each binary after the last element of its package path.
		built := filepath.Join(tmp, filepath.Base(comp.pkg))
		if err := os.Rename(built, filepath.Join(c.binDir(), comp.name)); err != nil {
			return fmt.Errorf("install %s: %w", comp.name, err)
		}
		// The stamp goes in after the binary, so a stamp always names the
		// binary beside it.
		if comp.version != "" {
			stamp := filepath.Join(tmp, comp.versionFile())
			if err := os.WriteFile(stamp, []byte(comp.version+"\n"), 0o644); err != nil {
				return err
			}
			if err := os.Rename(stamp, filepath.Join(c.binDir(), comp.versionFile())); err != nil {
				return fmt.Errorf("install %s: %w", comp.versionFile(), err)
			}
		}
	}
	if m.files == nil {
		return nil
	}
	files, err := m.files(ctx, srcDir)
	if err != nil {
		return err
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(content), 0o644); err != nil {
			return err
		}
		if err := os.Rename(filepath.Join(tmp, name), filepath.Join(c.binDir(), name)); err != nil {
			return fmt.Errorf("install %s: %w", name, err)
		}
	}
	return nil
}

// runGo runs the go command in dir, counting its progress lines to print a
// heartbeat, and returns an error carrying a one-line reason after
// printing the tail of the output if the command fails.
func (c *cache) runGo(ctx context.Context, dir, what, unit string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	// The generated modules stand alone: never let a go.work of the caller
	// pull them into a workspace. Everything else (GOFLAGS, GOPROXY, ...)
	// is the caller's.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	cmd.Stdout = os.Stderr

	c.log("%s (go %s)", what, strings.Join(args, " "))
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	progress := &outputTail{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		progress.consume(out)
	}()
	stopHeartbeat := c.heartbeat(what, unit, start, progress)
	<-done // all output read before Wait closes the pipe
	err = cmd.Wait()
	stopHeartbeat()

	if err != nil {
		for _, line := range progress.tail() {
			fmt.Fprintln(os.Stderr, "    "+line)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: interrupted after %s", what, since(start))
		}
		return fmt.Errorf("%s failed after %s: go %s in %s: %v", what, since(start), args[0], dir, err)
	}
	c.log("%s: done in %s (%d %s)", what, since(start), progress.count(), unit)
	return nil
}

// heartbeat logs progress every heartbeatInterval until the returned func
// is called, so a multi-minute build is visibly alive.
func (c *cache) heartbeat(what, unit string, start time.Time, progress *outputTail) (stop func()) {
	ticker := time.NewTicker(heartbeatInterval)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ticker.C:
				c.log("%s: %s elapsed, %d %s so far", what, since(start), progress.count(), unit)
			case <-quit:
				return
			}
		}
	})
	return func() {
		ticker.Stop()
		close(quit)
		wg.Wait()
	}
}

// outputTail counts the progress lines of a go command's output and keeps
// the last failureTailLines lines.
type outputTail struct {
	mu    sync.Mutex
	lines []string
	n     int
}

func (o *outputTail) consume(r io.Reader) {
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 64*1024), 1024*1024)
	for scanner.Scan() {
		line := scanner.Text()
		o.mu.Lock()
		if isProgress(line) {
			o.n++
		}
		o.lines = append(o.lines, line)
		if len(o.lines) > failureTailLines {
			o.lines = o.lines[1:]
		}
		o.mu.Unlock()
	}
}

// isProgress reports whether line is a unit of progress: a package name
// printed by go build -v, or a module download reported by go mod tidy.
// Error messages and the like contain spaces and are not counted.
func isProgress(line string) bool {
	return !strings.Contains(line, " ") || strings.HasPrefix(line, "go: downloading ")
}

func (o *outputTail) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n
}

func (o *outputTail) tail() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.lines)
}

func since(start time.Time) time.Duration { return time.Since(start).Round(time.Second) }

const generatedHeader = "// Code generated by hack/controlplane. DO NOT EDIT.\n\n"

// generateEtcd writes a module whose main package is etcd's: the etcd
// server module is a library (etcdmain) plus a root main package that
// cannot be built from outside its module without a requiring module.
func generateEtcd(_ context.Context, dir string, _ []string) error {
	goMod := "module hcc.local/controlplane/etcd\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 " + etcdVersion + "\n"
	mainGo := generatedHeader + `package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
`
	return writeFiles(dir, map[string]string{"go.mod": goMod, "main.go": mainGo})
}

// generateKubernetes writes a module requiring k8s.io/kubernetes. That
// module's go.mod requires its staging modules (k8s.io/api, ...) at v0.0.0
// and replaces them with directories of its own repository; replacements
// only apply in the main module, so this one must replace every staging
// module with its published release. The list comes from k8s.io/kubernetes's
// own go.mod so that it follows upstream.
func generateKubernetes(ctx context.Context, dir string, pkgs []string) error {
	staging, err := kubernetesStagingModules(ctx)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("module hcc.local/controlplane/kubernetes\n\ngo 1.26.0\n\n")
	b.WriteString("require k8s.io/kubernetes " + kubernetesVersion + "\n\nreplace (\n")
	for _, mod := range staging {
		fmt.Fprintf(&b, "\t%s => %s %s\n", mod, mod, stagingVersion)
	}
	b.WriteString(")\n")
	return writeFiles(dir, map[string]string{
		"go.mod":   b.String(),
		"tools.go": toolsGo(pkgs),
	})
}

func generateKwok(_ context.Context, dir string, pkgs []string) error {
	goMod := "module hcc.local/controlplane/kwok\n\ngo 1.26.0\n\nrequire sigs.k8s.io/kwok " + kwokVersion + "\n"
	return writeFiles(dir, map[string]string{"go.mod": goMod, "tools.go": toolsGo(pkgs)})
}

// generateKubeRouter writes a module requiring kube-router, so that its
// dependencies (an older client-go among them) are resolved apart from
// every other component and never touch HCC's own go.mod.
func generateKubeRouter(_ context.Context, dir string, pkgs []string) error {
	goMod := "module hcc.local/controlplane/kuberouter\n\ngo 1.26.0\n\nrequire github.com/cloudnativelabs/kube-router/v2 " + kubeRouterVersion + "\n"
	return writeFiles(dir, map[string]string{"go.mod": goMod, "tools.go": toolsGo(pkgs)})
}

// kwokStagesFile holds the kwok Stages of a fast fake node: the node
// becomes Ready and renews its Lease, pods become Running and Ready at
// once, Job pods complete, and deleted pods go away.
const kwokStagesFile = "kwok-stages.yaml"

// kwokStageFiles are those stages as the kwok module ships them, under
// kustomize/stage.
var kwokStageFiles = []string{
	"node/fast/node-initialize.yaml",
	"node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
	"pod/fast/pod-ready.yaml",
	"pod/fast/pod-complete.yaml",
	"pod/fast/pod-delete.yaml",
}

// kwokStages joins kwok's own stage files into one multi-document file
// for kwok --config, so the stages always match the kwok version built.
func kwokStages(ctx context.Context, srcDir string) (map[string]string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok")
	cmd.Dir = srcDir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("locating the kwok module: %w", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "kustomize", "stage")
	var b strings.Builder
	b.WriteString("# Code generated by hack/controlplane from sigs.k8s.io/kwok " + kwokVersion + " kustomize/stage. DO NOT EDIT.\n")
	for _, name := range kwokStageFiles {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("kwok stage: %w", err)
		}
		b.WriteString("---\n")
		b.Write(data)
		if !strings.HasSuffix(string(data), "\n") {
			b.WriteString("\n")
		}
	}
	return map[string]string{kwokStagesFile: b.String()}, nil
}

// toolsGo imports the main packages pkgs, so that go mod tidy records
// their dependencies. The build tag keeps the file itself out of every
// build (a main package cannot really be imported).
func toolsGo(pkgs []string) string {
	var b strings.Builder
	b.WriteString("//go:build tools\n\n" + generatedHeader + "package tools\n\nimport (\n")
	for _, pkg := range pkgs {
		fmt.Fprintf(&b, "\t_ %q\n", pkg)
	}
	b.WriteString(")\n")
	return b.String()
}

// kubernetesVersionLdflags stamps the release into the Kubernetes
// binaries, as upstream's hack/lib/version.sh does; without it they report
// v0.0.0-master to --version and to clients reading /version.
func kubernetesVersionLdflags() []string {
	major, rest, _ := strings.Cut(strings.TrimPrefix(kubernetesVersion, "v"), ".")
	minor, _, _ := strings.Cut(rest, ".")
	var flags []string
	for _, pkg := range []string{"k8s.io/client-go/pkg/version", "k8s.io/component-base/version"} {
		flags = append(flags,
			"-X", pkg+".gitVersion="+kubernetesVersion,
			"-X", pkg+".gitMajor="+major,
			"-X", pkg+".gitMinor="+minor,
			"-X", pkg+".gitTreeState=clean",
		)
	}
	return flags
}

var stagingReplace = regexp.MustCompile(`^\s*(?:replace\s+)?(k8s\.io/\S+)\s+=>\s+\./staging/`)

// kubernetesStagingModules returns the modules that k8s.io/kubernetes's
// go.mod replaces with ./staging/... directories.
func kubernetesStagingModules(ctx context.Context) ([]string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", "k8s.io/kubernetes@"+kubernetesVersion)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go mod download k8s.io/kubernetes@%s: %w", kubernetesVersion, err)
	}
	var info struct{ GoMod, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return nil, fmt.Errorf("go mod download -json output: %w", err)
	}
	if info.Error != "" {
		return nil, fmt.Errorf("go mod download k8s.io/kubernetes@%s: %s", kubernetesVersion, info.Error)
	}
	// Read only what the download reported; an empty path would otherwise
	// surface as a baffling "open : no such file".
	if info.GoMod == "" {
		return nil, fmt.Errorf("go mod download k8s.io/kubernetes@%s reported no go.mod path", kubernetesVersion)
	}
	goMod, err := os.ReadFile(info.GoMod)
	if err != nil {
		return nil, err
	}
	var mods []string
	for line := range strings.Lines(string(goMod)) {
		if m := stagingReplace.FindStringSubmatch(line); m != nil {
			mods = append(mods, m[1])
		}
	}
	if len(mods) == 0 {
		return nil, fmt.Errorf("no staging replacements found in %s", info.GoMod)
	}
	return mods, nil
}

func writeFiles(dir string, files map[string]string) error {
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}
