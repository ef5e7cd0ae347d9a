package main

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

var binaries = []string{"hcc-controller", "hcc-api"}

// repoRoot is the main module's root: go test runs in hack/images.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "deploy", "kustomization.yaml"))
	require.NoError(t, err)
	return root
}

// fakeBuild runs build on stand-in binaries into dir/images and returns
// that directory.
func fakeBuild(t *testing.T, dir, registry string) string {
	t.Helper()
	binDir := filepath.Join(dir, "bin")
	for _, p := range []string{"linux-amd64", "linux-arm64"} {
		require.NoError(t, os.MkdirAll(filepath.Join(binDir, p), 0o755))
		for _, b := range binaries {
			require.NoError(t, os.WriteFile(filepath.Join(binDir, p, b), []byte("binary "+b+" for "+p), 0o755))
		}
	}
	out := filepath.Join(dir, "images")
	args := []string{"build", "--bin-dir", binDir, "--out", out, "--deploy", filepath.Join(repoRoot(t), "deploy"),
		"--version", "v1.2.3", "--commit", "abcdef0", "--source-date-epoch", "1782909045"}
	if registry != "" {
		args = append(args, "--registry", registry)
	}
	var stdout bytes.Buffer
	require.NoError(t, run(context.Background(), args, &stdout))
	digests, err := os.ReadFile(filepath.Join(out, digestsFile))
	require.NoError(t, err)
	assert.Contains(t, stdout.String(), string(digests), "the digests are printed")
	return out
}

// digestsOf parses digests.txt: binary -> "index" or platform -> digest.
func digestsOf(t *testing.T, out string) map[string]map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(out, digestsFile))
	require.NoError(t, err)
	got := map[string]map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		require.GreaterOrEqual(t, len(f), 3, line)
		if got[f[0]] == nil {
			got[f[0]] = map[string]string{}
		}
		got[f[0]][f[1]] = f[2]
	}
	return got
}

// kustomize builds dir and returns each Deployment's container images.
func kustomize(t *testing.T, dir string) (map[string][]string, []byte) {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(t, err, "kustomize build %s", dir)
	images := map[string][]string{}
	for _, r := range m.Resources() {
		if r.GetKind() != "Deployment" {
			continue
		}
		containers, err := r.Pipe(yaml.Lookup("spec", "template", "spec", "containers"))
		require.NoError(t, err)
		elems, err := containers.Elements()
		require.NoError(t, err)
		for _, c := range elems {
			images[r.GetName()] = append(images[r.GetName()], yaml.GetValue(c.Field("image").Value))
		}
	}
	all, err := m.AsYaml()
	require.NoError(t, err)
	return images, all
}

// TestOverlaysPinTheImages: the deploy overlay is deploy/ with each image at
// its index's digest, nothing else changed; the minikube overlay is
// deploy/overlays/minikube with the loaded archives' tag.
func TestOverlaysPinTheImages(t *testing.T) {
	out := fakeBuild(t, t.TempDir(), "registry.example/team")
	digests := digestsOf(t, out)
	root := repoRoot(t)

	images, built := kustomize(t, filepath.Join(out, deployOverlay))
	for _, b := range binaries {
		require.Contains(t, digests, b)
		assert.Equal(t, []string{"registry.example/team/" + b + "@" + digests[b]["index"]}, images[b])
	}
	_, plain := kustomize(t, filepath.Join(root, "deploy"))
	for _, b := range binaries {
		built = bytes.Replace(built, []byte("registry.example/team/"+b+"@"+digests[b]["index"]), []byte("ghcr.io/clerum/"+b+":dev"), 1)
	}
	assert.Equal(t, string(plain), string(built), "the overlay changes the images and nothing else")

	images, _ = kustomize(t, filepath.Join(out, minikubeOverlay))
	for _, b := range binaries {
		assert.Equal(t, []string{"registry.example/team/" + b + ":v1.2.3"}, images[b])
	}
}

// TestBuildDefaultsToTheCommittedName: without a registry the images keep
// the name the committed trees give them.
func TestBuildDefaultsToTheCommittedName(t *testing.T) {
	out := fakeBuild(t, t.TempDir(), "")
	images, _ := kustomize(t, filepath.Join(out, deployOverlay))
	assert.Equal(t, []string{"ghcr.io/clerum/hcc-api@" + digestsOf(t, out)["hcc-api"]["index"]}, images["hcc-api"])
}

// TestBuildReplacesOnlyItsOwnOutput: a rebuild replaces an earlier build
// whole (a layout only grows, so an old blob would linger), and refuses a
// directory that is not one.
func TestBuildReplacesOnlyItsOwnOutput(t *testing.T) {
	dir := t.TempDir()
	out := fakeBuild(t, dir, "")
	stale := filepath.Join(out, "hcc-api", "blobs", "sha256", "stale")
	require.NoError(t, os.WriteFile(stale, nil, 0o644))
	fakeBuild(t, dir, "")
	assert.NoFileExists(t, stale)

	other := t.TempDir()
	keep := filepath.Join(other, "keep")
	require.NoError(t, os.WriteFile(keep, nil, 0o644))
	err := run(context.Background(), []string{"build", "--bin-dir", filepath.Join(dir, "bin"), "--out", other,
		"--deploy", filepath.Join(repoRoot(t), "deploy"), "--version", "v1", "--commit", "c", "--source-date-epoch", "0"}, io.Discard)
	assert.ErrorContains(t, err, "not an output of make images")
	assert.FileExists(t, keep)
}

func TestBuildNeedsATime(t *testing.T) {
	err := run(context.Background(), []string{"build", "--bin-dir", "b", "--out", "o", "--deploy", "d", "--version", "v1", "--commit", "c"}, io.Discard)
	assert.ErrorContains(t, err, "never from the clock")
}

// TestPushPinsWhatWasBuilt pushes to a registry in the test process: the
// tag serves the index digest make images printed, and the deploy overlay
// then names the images there by that digest.
func TestPushPinsWhatWasBuilt(t *testing.T) {
	out := fakeBuild(t, t.TempDir(), "")
	want := digestsOf(t, out)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	reg := strings.TrimPrefix(srv.URL, "http://") + "/team"

	var stdout bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"push", "--out", out, "--deploy", filepath.Join(repoRoot(t), "deploy"), "--registry", reg}, &stdout))

	images, _ := kustomize(t, filepath.Join(out, deployOverlay))
	for _, b := range binaries {
		ref, err := name.NewTag(reg + "/" + b + ":v1.2.3")
		require.NoError(t, err)
		desc, err := remote.Head(ref)
		require.NoError(t, err)
		assert.Equal(t, want[b]["index"], desc.Digest.String(), "%s: the registry serves the built index", b)
		assert.Contains(t, stdout.String(), reg+"/"+b+"@"+want[b]["index"])
		assert.Equal(t, []string{reg + "/" + b + "@" + want[b]["index"]}, images[b])
		for _, p := range []string{"linux/amd64", "linux/arm64"} {
			plat, err := v1.ParsePlatform(p)
			require.NoError(t, err)
			img, err := remote.Image(ref, remote.WithPlatform(*plat))
			require.NoError(t, err)
			d, err := img.Digest()
			require.NoError(t, err)
			assert.Equal(t, want[b][p], d.String(), "%s %s", b, p)
		}
	}
}

func TestPushNeedsARegistry(t *testing.T) {
	err := run(context.Background(), []string{"push", "--out", "o", "--deploy", "d"}, io.Discard)
	assert.ErrorContains(t, err, "--registry is required")
}
