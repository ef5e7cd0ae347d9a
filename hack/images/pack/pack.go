// Package pack builds the images of HCC's binaries (docs/deploy.md, "The
// images"): one static binary on an empty base per platform, the platforms
// gathered in one OCI image index per binary. The rest of the package writes
// them out: an OCI image layout, docker-load tarballs, a registry push and
// kustomize overlays that name them by digest.
//
// An image is a function of its inputs alone — the binary's bytes, the
// platform and Meta — so one commit built twice gives the same digests. No
// clock is read: the layer's tar has one entry with a fixed owner, mode and
// time, the gzip stream carries no name or time, and every timestamp (the
// config's, its history's, the created annotation) is Meta.Created, the
// commit's time.
package pack

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// User is the uid:gid the images run as: the runAsUser and runAsGroup of the
// Deployments in deploy/base. An empty base has no /etc/passwd, so it is
// numeric.
const User = "65532:65532"

// The OCI annotation keys (image-spec annotations.md) each image, its index
// and the config's labels carry.
const (
	AnnotationCreated  = "org.opencontainers.image.created"
	AnnotationSource   = "org.opencontainers.image.source"
	AnnotationVersion  = "org.opencontainers.image.version"
	AnnotationRevision = "org.opencontainers.image.revision"
	AnnotationTitle    = "org.opencontainers.image.title"
	// AnnotationRefName names an image in an OCI layout's index.json: the tag.
	AnnotationRefName = "org.opencontainers.image.ref.name"
)

// Meta is what an image says about itself besides its binary.
type Meta struct {
	// Name is the binary's name: the image's title and the binary's path in
	// it (/hcc-controller).
	Name string
	// Version and Commit are what `make build` stamps into the binary
	// (git describe, the commit's hash).
	Version string
	Commit  string
	// Source is the URL of the source repository.
	Source string
	// Created is every timestamp of the image: the commit's time
	// (SOURCE_DATE_EPOCH), never the time of the build.
	Created time.Time
}

// binaryName is what may be a file at the root of an image: a command under
// cmd/.
var binaryName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

func (m Meta) validate() error {
	switch {
	case !binaryName.MatchString(m.Name):
		return fmt.Errorf("binary name %q: want lower-case letters, digits and dashes", m.Name)
	case m.Version == "":
		return errors.New("no version")
	case m.Commit == "":
		return errors.New("no commit")
	case m.Created.IsZero():
		// The zero time.Time (year 1), not the Unix epoch: nobody said when.
		return errors.New("no creation time (SOURCE_DATE_EPOCH)")
	}
	return nil
}

// Annotations are the OCI annotations of the image, its index and the
// config's labels (what `docker inspect` shows).
func (m Meta) Annotations() map[string]string {
	a := map[string]string{
		AnnotationTitle:    m.Name,
		AnnotationVersion:  m.Version,
		AnnotationRevision: m.Commit,
		AnnotationCreated:  m.Created.UTC().Format(time.RFC3339),
	}
	if m.Source != "" {
		a[AnnotationSource] = m.Source
	}
	return a
}

// Entrypoint is the path of the binary in the image.
func (m Meta) Entrypoint() string { return "/" + m.Name }

// Image is binary alone on an empty base for platform: one layer holding
// /<name> (root-owned, mode 0555: the user 65532 runs it and cannot change
// it), the entrypoint, user 65532:65532, and meta's annotations on the
// manifest and as labels of the config.
func Image(binary []byte, platform v1.Platform, meta Meta) (v1.Image, error) {
	if err := meta.validate(); err != nil {
		return nil, err
	}
	if platform.OS == "" || platform.Architecture == "" {
		return nil, fmt.Errorf("%s: platform %q has no OS or architecture", meta.Name, platform.String())
	}
	if len(binary) == 0 {
		return nil, fmt.Errorf("%s: empty binary", meta.Name)
	}
	layer, err := binaryLayer(meta.Name, binary, meta.Created)
	if err != nil {
		return nil, fmt.Errorf("%s: layer: %w", meta.Name, err)
	}

	created := v1.Time{Time: meta.Created.UTC()}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   created,
			CreatedBy: "make images",
			Comment:   meta.Name + " " + meta.Version,
		},
	})
	if err != nil {
		return nil, err
	}
	// Append filled in the layer's diff ID and history; the rest of the
	// config is set whole, so nothing of empty.Image's defaults remains.
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture = platform.Architecture
	cf.OS = platform.OS
	cf.Variant = platform.Variant
	cf.Created = created
	cf.Config = v1.Config{
		User:       User,
		Entrypoint: []string{meta.Entrypoint()},
		WorkingDir: "/",
		Labels:     meta.Annotations(),
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	return mutate.Annotations(img, meta.Annotations()).(v1.Image), nil
}

// Index gathers images, one per platform, in that order, under meta's
// annotations. Each descriptor names its image's platform, read from the
// image's config, so a runtime pulls the one it runs.
func Index(images []v1.Image, meta Meta) (v1.ImageIndex, error) {
	if err := meta.validate(); err != nil {
		return nil, err
	}
	if len(images) == 0 {
		return nil, fmt.Errorf("%s: no image", meta.Name)
	}
	seen := map[string]bool{}
	adds := make([]mutate.IndexAddendum, 0, len(images))
	for _, img := range images {
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		p := cf.Platform()
		if p == nil || seen[p.String()] {
			return nil, fmt.Errorf("%s: two images for platform %v, or one without", meta.Name, p)
		}
		seen[p.String()] = true
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: p}})
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	return mutate.Annotations(idx, meta.Annotations()).(v1.ImageIndex), nil
}

// binaryLayer is a gzipped tar holding the file name (at the root) with
// binary's bytes. Every header field is fixed — owner root, mode 0555,
// mtime — and USTAR is required, so no PAX record (with its access and
// change times) can creep in.
func binaryLayer(name string, binary []byte, mtime time.Time) (v1.Layer, error) {
	var tarred bytes.Buffer
	tw := tar.NewWriter(&tarred)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Mode:     0o555,
		Size:     int64(len(binary)),
		ModTime:  mtime.UTC().Truncate(time.Second),
		Format:   tar.FormatUSTAR,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(binary); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}

	// compress/gzip writes no name and a zero time unless told to; the
	// compressed bytes are a function of the input and this level (and of
	// the Go release's compressor: the toolchain is an input of the digest,
	// as it is of the binary's). The default level: on hcc-controller,
	// BestCompression took three times as long for 0.2 % less.
	var zipped bytes.Buffer
	zw, err := gzip.NewWriterLevel(&zipped, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(tarred.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	l := &layer{zipped: zipped.Bytes()}
	if l.digest, _, err = v1.SHA256(bytes.NewReader(l.zipped)); err != nil {
		return nil, err
	}
	if l.diffID, _, err = v1.SHA256(bytes.NewReader(tarred.Bytes())); err != nil {
		return nil, err
	}
	return l, nil
}

// layer is a gzipped tar held in memory with its two digests. (tarball's
// layers would do, but describe themselves with an empty annotations map
// that no manifest can round-trip.)
type layer struct {
	zipped         []byte
	digest, diffID v1.Hash
}

var _ v1.Layer = (*layer)(nil)

func (l *layer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l *layer) DiffID() (v1.Hash, error)            { return l.diffID, nil }
func (l *layer) Size() (int64, error)                { return int64(len(l.zipped)), nil }
func (l *layer) MediaType() (types.MediaType, error) { return types.OCILayer, nil }

func (l *layer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.zipped)), nil
}

func (l *layer) Uncompressed() (io.ReadCloser, error) {
	return gzip.NewReader(bytes.NewReader(l.zipped))
}
