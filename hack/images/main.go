// Command images builds the OCI images of hcc-controller and hcc-api from
// binaries `make images` cross-built, and pushes them (docs/deploy.md, "The
// images"). No Docker daemon, and no registry until push.
//
// Usage (the Makefile's images and push targets run it):
//
//	go run . build --bin-dir DIR --out DIR --deploy DIR --version V --commit C --source-date-epoch N [--registry R] ...
//	go run . push  --out DIR --deploy DIR --registry R
//
// build reads DIR/<os>-<arch>/<binary> for every binary and platform and
// writes into --out, which it replaces whole:
//
//	<binary>/                      OCI image layout: one image index, every platform
//	<binary>-<os>-<arch>.tar       docker load archive of one platform, tagged R/<binary>:V
//	digests.txt                    every index, manifest and config digest (also printed)
//	deploy/kustomization.yaml      deploy/ with both images by digest, named under R
//	minikube/kustomization.yaml    deploy/overlays/minikube with the loaded archives' tag
//
// push writes each layout's index to R/<binary>:V, checks the registry
// serves the same digest, and rewrites deploy/kustomization.yaml to name
// the images under R. Credentials come from docker's config
// (~/.docker/config.json, DOCKER_CONFIG, credential helpers).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/clerum/hcc/hack/images/pack"
)

const (
	// defaultRegistry is where the committed trees say the images live
	// (deploy/base/*/kustomization.yaml), and the repository the generated
	// overlays match.
	defaultRegistry = "ghcr.io/clerum"
	defaultSource   = "https://github.com/clerum/hcc"
	digestsFile     = "digests.txt"
	// The generated overlays, under --out.
	deployOverlay   = "deploy"
	minikubeOverlay = "minikube"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: images build|push [flags]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	var (
		binDir    = fs.String("bin-dir", "", "build: the cross-built binaries, as DIR/<os>-<arch>/<binary>")
		out       = fs.String("out", "", "the images' directory (_output/images); build replaces it")
		deploy    = fs.String("deploy", "", "the repository's deploy/ directory, which the overlays build on")
		binaries  = fs.String("binaries", "hcc-controller,hcc-api", "the binaries, comma-separated")
		platforms = fs.String("platforms", "linux/amd64,linux/arm64", "build: the platforms, comma-separated")
		registry  = fs.String("registry", "", "where the images live, without the binary's name (build: "+defaultRegistry+" if empty)")
		version   = fs.String("version", "", "build: the version make build stamps (git describe); also the tag")
		commit    = fs.String("commit", "", "build: the commit make build stamps")
		source    = fs.String("source", defaultSource, "build: the source repository's URL")
		epoch     = fs.String("source-date-epoch", "", "build: every timestamp of the images, in seconds since 1970 (the commit's time)")
	)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *out == "" || *deploy == "" {
		return errors.New("--out and --deploy are required")
	}
	names := strings.Split(*binaries, ",")
	switch args[0] {
	case "build":
		if *binDir == "" {
			return errors.New("build: --bin-dir is required")
		}
		if *epoch == "" {
			return errors.New("build: --source-date-epoch is required: the images take their time from the commit, never from the clock")
		}
		secs, err := strconv.ParseInt(*epoch, 10, 64)
		if err != nil {
			return fmt.Errorf("build: --source-date-epoch %q: %w", *epoch, err)
		}
		var plats []v1.Platform
		for _, s := range strings.Split(*platforms, ",") {
			p, err := v1.ParsePlatform(s)
			if err != nil {
				return fmt.Errorf("build: platform %q: %w", s, err)
			}
			plats = append(plats, *p)
		}
		if *registry == "" {
			*registry = defaultRegistry
		}
		b := builder{
			binDir: *binDir, out: *out, deploy: *deploy, registry: *registry,
			binaries: names, platforms: plats,
			version: *version, commit: *commit, source: *source,
			created: time.Unix(secs, 0).UTC(),
		}
		return b.build(stdout)
	case "push":
		if *registry == "" {
			return errors.New("push: --registry is required (make push REGISTRY=host/path)")
		}
		return push(ctx, *out, *deploy, *registry, names, stdout, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	default:
		return fmt.Errorf("unknown command %q: build or push", args[0])
	}
}

type builder struct {
	binDir, out, deploy, registry string
	binaries                      []string
	platforms                     []v1.Platform
	version, commit, source       string
	created                       time.Time
}

// built is one binary's images, for digests.txt and the overlays.
type built struct {
	binary string
	ref    name.Tag
	index  v1.Hash
	// Per platform, in --platforms order.
	platforms []platformImage
}

type platformImage struct {
	platform v1.Platform
	manifest v1.Hash
	config   v1.Hash // the image ID `docker load` and crictl show
	tarball  string  // relative to --out
}

func (b builder) build(stdout io.Writer) error {
	if err := resetOut(b.out); err != nil {
		return err
	}
	var all []built
	for _, binary := range b.binaries {
		bl, err := b.buildBinary(binary)
		if err != nil {
			return err
		}
		all = append(all, bl)
	}
	digests := formatDigests(b.version, b.commit, b.created, all)
	if err := os.WriteFile(filepath.Join(b.out, digestsFile), digests, 0o644); err != nil {
		return err
	}
	if err := writeDeployOverlay(b.out, b.deploy, b.registry, all); err != nil {
		return err
	}
	if err := writeMinikubeOverlay(b.out, b.deploy, all); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "images of %s (commit %s) in %s:\n", b.version, b.commit, b.out)
	_, err := stdout.Write(digests)
	return err
}

func (b builder) buildBinary(binary string) (built, error) {
	meta := pack.Meta{Name: binary, Version: b.version, Commit: b.commit, Source: b.source, Created: b.created}
	ref, err := name.NewTag(b.registry+"/"+binary+":"+b.version, name.StrictValidation)
	if err != nil {
		return built{}, fmt.Errorf("%s: the version %q does not make an image reference: %w", binary, b.version, err)
	}
	bl := built{binary: binary, ref: ref}
	var images []v1.Image
	for _, p := range b.platforms {
		dir := p.OS + "-" + p.Architecture
		raw, err := os.ReadFile(filepath.Join(b.binDir, dir, binary))
		if err != nil {
			return built{}, err
		}
		img, err := pack.Image(raw, p, meta)
		if err != nil {
			return built{}, err
		}
		tar := binary + "-" + dir + ".tar"
		if err := pack.WriteDockerTarball(filepath.Join(b.out, tar), ref, img); err != nil {
			return built{}, fmt.Errorf("%s: %w", tar, err)
		}
		manifest, err := img.Digest()
		if err != nil {
			return built{}, err
		}
		config, err := img.ConfigName()
		if err != nil {
			return built{}, err
		}
		images = append(images, img)
		bl.platforms = append(bl.platforms, platformImage{platform: p, manifest: manifest, config: config, tarball: tar})
	}
	idx, err := pack.Index(images, meta)
	if err != nil {
		return built{}, err
	}
	if bl.index, err = idx.Digest(); err != nil {
		return built{}, err
	}
	if err := pack.WriteLayout(filepath.Join(b.out, binary), idx, ref); err != nil {
		return built{}, err
	}
	return bl, nil
}

// resetOut empties dir for a new build. It removes only a directory an
// earlier build wrote (it holds digests.txt) or an empty one, so a mistyped
// --out cannot delete anything else.
func resetOut(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	case len(entries) > 0:
		if _, err := os.Stat(filepath.Join(dir, digestsFile)); err != nil {
			return fmt.Errorf("%s is not empty and holds no %s: not an output of make images, not removing it", dir, digestsFile)
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	return os.MkdirAll(dir, 0o755)
}

// formatDigests is digests.txt: a header, then one line per index and per
// platform's manifest: binary, "index" or the platform, the digest, and for
// a platform the config digest (the image ID a loaded archive shows) and
// its docker archive.
func formatDigests(version, commit string, created time.Time, all []built) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s (commit %s), created %s\n", version, commit, created.Format(time.RFC3339))
	for _, bl := range all {
		fmt.Fprintf(&b, "%s index %s %s@%s\n", bl.binary, bl.index, bl.ref.Context(), bl.index)
		for _, p := range bl.platforms {
			fmt.Fprintf(&b, "%s %s %s id=%s %s\n", bl.binary, p.platform.String(), p.manifest, p.config, p.tarball)
		}
	}
	return []byte(b.String())
}

// writeDeployOverlay writes out/deploy: the production tree with every
// image at its index's digest under registry.
func writeDeployOverlay(out, deploy, registry string, all []built) error {
	var images []pack.OverlayImage
	for _, bl := range all {
		images = append(images, pack.OverlayImage{
			Name:    defaultRegistry + "/" + bl.binary,
			NewName: registry + "/" + bl.binary,
			Digest:  bl.index,
		})
	}
	comment := []string{
		"Generated by make images (hack/images); make push rewrites it.",
		"deploy/ with the images of " + all[0].ref.TagStr() + " by digest, in " + registry + ":",
		"kubectl apply -k on this directory once they are pushed there (docs/deploy.md).",
	}
	return writeOverlay(filepath.Join(out, deployOverlay), deploy, comment, images)
}

// writeMinikubeOverlay writes out/minikube: the minikube overlay with the
// tag of the docker archives, which a local cluster knows the loaded images
// by (a loaded archive has no registry digest to pin).
func writeMinikubeOverlay(out, deploy string, all []built) error {
	var images []pack.OverlayImage
	for _, bl := range all {
		images = append(images, pack.OverlayImage{
			Name:    defaultRegistry + "/" + bl.binary,
			NewName: bl.ref.Context().String(),
			Tag:     bl.ref.TagStr(),
		})
	}
	comment := []string{
		"Generated by make images (hack/images): deploy/overlays/minikube with the",
		"images " + all[0].ref.TagStr() + " of the docker archives beside it, once loaded into the",
		"cluster (minikube image load, kind load image-archive; docs/deploy.md).",
	}
	return writeOverlay(filepath.Join(out, minikubeOverlay), filepath.Join(deploy, "overlays", "minikube"), comment, images)
}

// writeOverlay writes dir/kustomization.yaml over the tree at base.
func writeOverlay(dir, base string, comment []string, images []pack.OverlayImage) error {
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	absBase, err := filepath.Abs(base)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(absDir, absBase)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "kustomization.yaml"), pack.Overlay(comment, filepath.ToSlash(rel), images), 0o644)
}

// push pushes every binary's layout under registry and rewrites the deploy
// overlay to name them there.
func push(ctx context.Context, out, deploy, registry string, binaries []string, stdout io.Writer, opts ...remote.Option) error {
	var all []built
	for _, binary := range binaries {
		idx, tag, err := pack.ReadLayout(filepath.Join(out, binary))
		if err != nil {
			return fmt.Errorf("%s: %w (run make images first)", binary, err)
		}
		ref, err := name.NewTag(registry+"/"+binary+":"+tag, name.StrictValidation)
		if err != nil {
			return fmt.Errorf("%s: %w", binary, err)
		}
		digest, err := pack.Push(ctx, idx, ref, opts...)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "pushed %s: %s@%s\n", ref, ref.Context(), digest)
		all = append(all, built{binary: binary, ref: ref, index: digest})
	}
	if err := writeDeployOverlay(out, deploy, registry, all); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "kubectl apply -k %s  # deploy/ with these digests\n", filepath.Join(out, deployOverlay))
	return nil
}
