package pack

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testIndex(t *testing.T) (v1.ImageIndex, []v1.Image) {
	t.Helper()
	m := testMeta()
	images := []v1.Image{mustImage(t, fakeBinary("amd64"), amd64, m), mustImage(t, fakeBinary("arm64"), arm64, m)}
	idx, err := Index(images, m)
	require.NoError(t, err)
	return idx, images
}

func TestLayoutRoundTrip(t *testing.T) {
	idx, _ := testIndex(t)
	dir := filepath.Join(t.TempDir(), "hcc-controller")
	ref := name.MustParseReference("ghcr.io/clerum/hcc-controller:v1.2.3").(name.Tag)
	require.NoError(t, WriteLayout(dir, idx, ref))

	got, tag, err := ReadLayout(dir)
	require.NoError(t, err)
	assert.Equal(t, "v1.2.3", tag)
	assert.Equal(t, digest(t, idx), digest(t, got))
	require.NoError(t, validate.Index(got), "every blob of the index is in the layout")

	p, err := layout.FromPath(dir)
	require.NoError(t, err)
	top, err := p.ImageIndex()
	require.NoError(t, err)
	m, err := top.IndexManifest()
	require.NoError(t, err)
	require.Len(t, m.Manifests, 1)
	assert.Equal(t, map[string]string{
		"org.opencontainers.image.ref.name": "v1.2.3",
		"io.containerd.image.name":          "ghcr.io/clerum/hcc-controller:v1.2.3",
	}, m.Manifests[0].Annotations)

	// Written over, a layout would keep the old index beside the new one.
	assert.ErrorContains(t, WriteLayout(dir, idx, ref), "exists already")
}

// TestDockerTarballLoads: the archive `docker load` reads holds the image's
// own config (its digest is the image ID docker shows) and layer, under the
// tag.
func TestDockerTarballLoads(t *testing.T) {
	_, images := testIndex(t)
	img := images[1]
	path := filepath.Join(t.TempDir(), "hcc-controller-linux-arm64.tar")
	tag := name.MustParseReference("ghcr.io/clerum/hcc-controller:v1.2.3").(name.Tag)
	require.NoError(t, WriteDockerTarball(path, tag, img))

	loaded, err := tarball.ImageFromPath(path, &tag)
	require.NoError(t, err)
	require.NoError(t, validate.Image(loaded))
	wantID, err := img.ConfigName()
	require.NoError(t, err)
	gotID, err := loaded.ConfigName()
	require.NoError(t, err)
	assert.Equal(t, wantID, gotID)
	wantLayers, err := img.Layers()
	require.NoError(t, err)
	gotLayers, err := loaded.Layers()
	require.NoError(t, err)
	require.Len(t, gotLayers, 1)
	assert.Equal(t, digest(t, wantLayers[0]), digest(t, gotLayers[0]))

	manifest, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
	require.NoError(t, err)
	require.Len(t, manifest, 1, "one image per archive")
	assert.Equal(t, []string{"ghcr.io/clerum/hcc-controller:v1.2.3"}, manifest[0].RepoTags)
}

// TestPushServesTheLocalDigest pushes to a registry in the test process:
// the tag then resolves to the very index that was built, and each
// platform's image comes back whole.
func TestPushServesTheLocalDigest(t *testing.T) {
	srv := httptest.NewServer(quietRegistry())
	defer srv.Close()
	idx, images := testIndex(t)
	ref, err := name.NewTag(strings.TrimPrefix(srv.URL, "http://") + "/team/hcc-controller:v1.2.3")
	require.NoError(t, err)

	got, err := Push(context.Background(), idx, ref)
	require.NoError(t, err)
	assert.Equal(t, digest(t, idx), got)

	remoteIdx, err := remote.Index(ref)
	require.NoError(t, err)
	assert.Equal(t, digest(t, idx), digest(t, remoteIdx))
	for _, p := range []v1.Platform{amd64, arm64} {
		img, err := remote.Image(ref, remote.WithPlatform(p))
		require.NoError(t, err)
		require.NoError(t, validate.Image(img), "%s: every blob was pushed", p)
	}
	assert.Equal(t, digest(t, images[0]), digest(t, mustRemoteImage(t, ref, amd64)))
}

// quietRegistry is an in-memory registry that logs nothing.
func quietRegistry() http.Handler {
	return registry.New(registry.Logger(log.New(io.Discard, "", 0)))
}

func mustRemoteImage(t *testing.T, ref name.Reference, p v1.Platform) v1.Image {
	t.Helper()
	img, err := remote.Image(ref, remote.WithPlatform(p))
	require.NoError(t, err)
	return img
}

// TestPushRefusesARewrittenIndex: a registry that serves another digest
// for the tag than the one pushed (a mirror that converts, a tag moved
// under our feet) fails the push, so no overlay pins what was not built.
func TestPushRefusesARewrittenIndex(t *testing.T) {
	reg := quietRegistry()
	other := "sha256:" + strings.Repeat("0", 64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead && strings.Contains(r.URL.Path, "/manifests/") {
			rec := httptest.NewRecorder()
			reg.ServeHTTP(rec, r)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.Header().Set("Docker-Content-Digest", other)
			w.WriteHeader(rec.Code)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	idx, _ := testIndex(t)
	ref, err := name.NewTag(strings.TrimPrefix(srv.URL, "http://") + "/team/hcc-controller:v1.2.3")
	require.NoError(t, err)

	_, err = Push(context.Background(), idx, ref)
	assert.ErrorContains(t, err, "the registry serves "+other)
}

func TestOverlay(t *testing.T) {
	d, err := v1.NewHash("sha256:" + strings.Repeat("a", 64))
	require.NoError(t, err)
	got := Overlay([]string{"Generated.", ""}, "../../../deploy", []OverlayImage{
		{Name: "ghcr.io/clerum/hcc-controller", NewName: "registry.example/team/hcc-controller", Digest: d},
		{Name: "ghcr.io/clerum/hcc-api", NewName: "ghcr.io/clerum/hcc-api", Tag: "v1"},
	})
	assert.Equal(t, `# Generated.
#
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - "../../../deploy"
images:
  - name: "ghcr.io/clerum/hcc-controller"
    newName: "registry.example/team/hcc-controller"
    digest: "sha256:`+strings.Repeat("a", 64)+`"
  - name: "ghcr.io/clerum/hcc-api"
    newName: "ghcr.io/clerum/hcc-api"
    newTag: "v1"
`, string(got))
}
