package pack

import (
	"archive/tar"
	"bytes"
	"io"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	amd64 = v1.Platform{OS: "linux", Architecture: "amd64"}
	arm64 = v1.Platform{OS: "linux", Architecture: "arm64"}
)

func testMeta() Meta {
	return Meta{
		Name:    "hcc-controller",
		Version: "v1.2.3-4-gabcdef0",
		Commit:  "abcdef0123456789abcdef0123456789abcdef01",
		Source:  "https://github.com/clerum/hcc",
		Created: time.Date(2026, 7, 1, 12, 30, 45, 0, time.UTC),
	}
}

// fakeBinary stands in for a built binary: bytes of a known content, a
// fresh slice each call so nothing is shared between two builds.
func fakeBinary(seed string) []byte {
	return bytes.Repeat([]byte("\x7fELF "+seed+" "), 4096)
}

func mustImage(t *testing.T, binary []byte, p v1.Platform, m Meta) v1.Image {
	t.Helper()
	img, err := Image(binary, p, m)
	require.NoError(t, err)
	require.NoError(t, validate.Image(img), "digests, diff IDs and sizes agree")
	return img
}

func digest(t *testing.T, d interface{ Digest() (v1.Hash, error) }) v1.Hash {
	t.Helper()
	h, err := d.Digest()
	require.NoError(t, err)
	return h
}

// TestImageIsAFunctionOfItsInputs: one commit built twice is one digest,
// and each input reaches it — a build that ignored the commit or the
// version would label two different builds alike.
func TestImageIsAFunctionOfItsInputs(t *testing.T) {
	base := digest(t, mustImage(t, fakeBinary("one"), amd64, testMeta()))
	assert.Equal(t, base, digest(t, mustImage(t, fakeBinary("one"), amd64, testMeta())), "same inputs, same digest")

	changes := map[string]func() v1.Image{
		"the binary": func() v1.Image { return mustImage(t, fakeBinary("two"), amd64, testMeta()) },
		"the platform": func() v1.Image {
			return mustImage(t, fakeBinary("one"), arm64, testMeta())
		},
		"the commit": func() v1.Image {
			m := testMeta()
			m.Commit = "0123456789abcdef0123456789abcdef01234567"
			return mustImage(t, fakeBinary("one"), amd64, m)
		},
		"the version": func() v1.Image {
			m := testMeta()
			m.Version = "v1.2.4"
			return mustImage(t, fakeBinary("one"), amd64, m)
		},
		"the creation time": func() v1.Image {
			m := testMeta()
			m.Created = m.Created.Add(time.Second)
			return mustImage(t, fakeBinary("one"), amd64, m)
		},
	}
	for what, build := range changes {
		assert.NotEqual(t, base, digest(t, build()), "changing %s must change the digest", what)
	}
}

func TestIndexIsAFunctionOfItsInputs(t *testing.T) {
	build := func(m Meta) v1.Hash {
		idx, err := Index([]v1.Image{
			mustImage(t, fakeBinary("amd64"), amd64, m),
			mustImage(t, fakeBinary("arm64"), arm64, m),
		}, m)
		require.NoError(t, err)
		require.NoError(t, validate.Index(idx))
		return digest(t, idx)
	}
	first := build(testMeta())
	assert.Equal(t, first, build(testMeta()))
	other := testMeta()
	other.Commit = "0123456789abcdef0123456789abcdef01234567"
	assert.NotEqual(t, first, build(other))
}

// TestImageHoldsTheBinaryAlone: one layer, one file — the binary at the
// root, root-owned and read-only, every header field fixed — and nothing
// else: no directory, no /etc, no certificate (the binary embeds its roots).
func TestImageHoldsTheBinaryAlone(t *testing.T) {
	binary := fakeBinary("one")
	m := testMeta()
	img := mustImage(t, binary, amd64, m)

	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1)
	mt, err := layers[0].MediaType()
	require.NoError(t, err)
	assert.Equal(t, types.OCILayer, mt)

	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	require.NoError(t, err)
	assert.Equal(t, &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     "hcc-controller",
		Mode:     0o555,
		Size:     int64(len(binary)),
		ModTime:  m.Created,
		Format:   tar.FormatUSTAR,
	}, normalize(hdr))
	content, err := io.ReadAll(tr)
	require.NoError(t, err)
	assert.Equal(t, binary, content)
	_, err = tr.Next()
	assert.Equal(t, io.EOF, err, "a second file in the layer")
}

// normalize drops what the reader fills in beyond the header's fields
// (parsed times are local).
func normalize(h *tar.Header) *tar.Header {
	c := *h
	c.ModTime = c.ModTime.UTC()
	c.AccessTime, c.ChangeTime = time.Time{}, time.Time{}
	return &c
}

func TestImageConfigAndManifest(t *testing.T) {
	m := testMeta()
	img := mustImage(t, fakeBinary("one"), arm64, m)

	cf, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "linux", cf.OS)
	assert.Equal(t, "arm64", cf.Architecture)
	assert.Equal(t, m.Created, cf.Created.UTC())
	assert.Equal(t, "65532:65532", cf.Config.User, "the Deployments' runAsUser and runAsGroup")
	assert.Equal(t, []string{"/hcc-controller"}, cf.Config.Entrypoint)
	assert.Empty(t, cf.Config.Cmd)
	assert.Empty(t, cf.Config.Env)
	want := map[string]string{
		"org.opencontainers.image.title":    "hcc-controller",
		"org.opencontainers.image.version":  "v1.2.3-4-gabcdef0",
		"org.opencontainers.image.revision": "abcdef0123456789abcdef0123456789abcdef01",
		"org.opencontainers.image.source":   "https://github.com/clerum/hcc",
		"org.opencontainers.image.created":  "2026-07-01T12:30:45Z",
	}
	assert.Equal(t, want, cf.Config.Labels)
	require.Len(t, cf.History, 1)
	assert.Equal(t, m.Created, cf.History[0].Created.UTC())
	require.Len(t, cf.RootFS.DiffIDs, 1)

	manifest, err := img.Manifest()
	require.NoError(t, err)
	assert.Equal(t, types.OCIManifestSchema1, manifest.MediaType)
	assert.Equal(t, types.OCIConfigJSON, manifest.Config.MediaType)
	assert.Equal(t, want, manifest.Annotations)
}

func TestIndexNamesEachPlatform(t *testing.T) {
	m := testMeta()
	amd, arm := mustImage(t, fakeBinary("amd64"), amd64, m), mustImage(t, fakeBinary("arm64"), arm64, m)
	idx, err := Index([]v1.Image{amd, arm}, m)
	require.NoError(t, err)

	im, err := idx.IndexManifest()
	require.NoError(t, err)
	assert.Equal(t, types.OCIImageIndex, im.MediaType)
	assert.Equal(t, m.Annotations(), im.Annotations)
	require.Len(t, im.Manifests, 2)
	for i, want := range []struct {
		img      v1.Image
		platform v1.Platform
	}{{amd, amd64}, {arm, arm64}} {
		d := im.Manifests[i]
		assert.Equal(t, types.OCIManifestSchema1, d.MediaType)
		assert.Equal(t, digest(t, want.img), d.Digest)
		require.NotNil(t, d.Platform)
		assert.Equal(t, want.platform, *d.Platform)
	}

	_, err = Index([]v1.Image{amd, mustImage(t, fakeBinary("other"), amd64, m)}, m)
	assert.ErrorContains(t, err, "two images for platform")
}

// TestMetaIsRequired: an image that cannot say what it is, or when, is not
// built; in particular a missing time is never filled in from the clock.
func TestMetaIsRequired(t *testing.T) {
	images := []v1.Image{mustImage(t, fakeBinary("one"), amd64, testMeta())}
	_, err := Index(images, testMeta())
	require.NoError(t, err)
	for what, edit := range map[string]func(*Meta){
		"no version":         func(m *Meta) { m.Version = "" },
		"no commit":          func(m *Meta) { m.Commit = "" },
		"no creation time":   func(m *Meta) { m.Created = time.Time{} },
		"a path as name":     func(m *Meta) { m.Name = "../hcc" },
		"an upper-case name": func(m *Meta) { m.Name = "HCC" },
	} {
		m := testMeta()
		edit(&m)
		_, err := Image(fakeBinary("one"), amd64, m)
		assert.Error(t, err, what)
		_, err = Index(images, m)
		assert.Error(t, err, what)
	}
	_, err = Index(nil, testMeta())
	assert.ErrorContains(t, err, "no image")
	_, err = Image(nil, amd64, testMeta())
	assert.ErrorContains(t, err, "empty binary")
	_, err = Image(fakeBinary("one"), v1.Platform{OS: "linux"}, testMeta())
	assert.Error(t, err)
}

// TestEpochIsAValidTime: SOURCE_DATE_EPOCH=0 (a tree without history) is
// 1970, a time like any other, not "unset".
func TestEpochIsAValidTime(t *testing.T) {
	m := testMeta()
	m.Created = time.Unix(0, 0).UTC()
	img := mustImage(t, fakeBinary("one"), amd64, m)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, int64(0), cf.Created.Unix())
}
