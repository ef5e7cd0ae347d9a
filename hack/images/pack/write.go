package pack

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// annotationContainerdName is the name `ctr images import` gives an image
// of an OCI archive (the layout, tarred).
const annotationContainerdName = "io.containerd.image.name"

// WriteLayout writes idx as an OCI image layout in dir, which must not
// exist yet: a layout only ever grows, and one written over an old one
// would keep the old blobs and name two indexes. index.json names idx by
// ref's tag (org.opencontainers.image.ref.name, what skopeo's
// oci:DIR:TAG selects) and by ref whole (containerd's import).
func WriteLayout(dir string, idx v1.ImageIndex, ref name.Tag) error {
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("OCI layout %s: exists already (or cannot be checked: %v)", dir, err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	err = p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		AnnotationRefName:        ref.TagStr(),
		annotationContainerdName: ref.Name(),
	}))
	if err != nil {
		return err
	}
	// layout writes blobs through temporary files (0600) and the rest with
	// 0777 less the umask: every file readable, none executable.
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			return os.Chmod(path, 0o755)
		default:
			return os.Chmod(path, 0o644)
		}
	})
}

// ReadLayout reads back a layout WriteLayout wrote: its one image index and
// the tag index.json names it by.
func ReadLayout(dir string) (v1.ImageIndex, string, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, "", err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, "", err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, "", err
	}
	if len(m.Manifests) != 1 || m.Manifests[0].MediaType != types.OCIImageIndex {
		return nil, "", fmt.Errorf("OCI layout %s: want one image index in index.json, found %d entries", dir, len(m.Manifests))
	}
	d := m.Manifests[0]
	tag := d.Annotations[AnnotationRefName]
	if tag == "" {
		return nil, "", fmt.Errorf("OCI layout %s: the index has no %s", dir, AnnotationRefName)
	}
	idx, err := top.ImageIndex(d.Digest)
	if err != nil {
		return nil, "", err
	}
	return idx, tag, nil
}

// WriteDockerTarball writes img as a `docker load` archive tagged ref, which
// `minikube image load` and `kind load image-archive` take too. The archive
// holds one platform's image: the format has no index.
func WriteDockerTarball(path string, ref name.Tag, img v1.Image) error {
	return tarball.WriteToFile(path, ref, img)
}

// Push writes idx, its manifests and their blobs to ref's repository under
// ref's tag, and returns the digest the registry then serves for the tag,
// which must be idx's own: a registry that rewrote the index (converted
// media types, say) would have the overlays pin something that was never
// built, so that is an error.
func Push(ctx context.Context, idx v1.ImageIndex, ref name.Tag, opts ...remote.Option) (v1.Hash, error) {
	want, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	opts = append([]remote.Option{remote.WithContext(ctx)}, opts...)
	if err := remote.WriteIndex(ref, idx, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("push %s: %w", ref, err)
	}
	desc, err := remote.Head(ref, opts...)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("push %s: reading it back: %w", ref, err)
	}
	if desc.Digest != want {
		return v1.Hash{}, fmt.Errorf("push %s: the registry serves %s for it, not the pushed index %s", ref, desc.Digest, want)
	}
	return desc.Digest, nil
}

// OverlayImage is one entry of an overlay's `images:`: the image named Name
// in the tree becomes NewName, at Digest if set, else at Tag.
type OverlayImage struct {
	Name    string
	NewName string
	Digest  v1.Hash
	Tag     string
}

// Overlay is a kustomization that takes the tree at base (a path relative
// to the overlay's directory) and sets its images; comment is its header,
// one line per element.
func Overlay(comment []string, base string, images []OverlayImage) []byte {
	var b strings.Builder
	for _, line := range comment {
		b.WriteString(strings.TrimRight("# "+line, " ") + "\n")
	}
	// Values are JSON strings, which YAML reads as double-quoted scalars.
	q := strconv.Quote
	b.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n")
	b.WriteString("  - " + q(base) + "\n")
	b.WriteString("images:\n")
	for _, img := range images {
		b.WriteString("  - name: " + q(img.Name) + "\n")
		b.WriteString("    newName: " + q(img.NewName) + "\n")
		if img.Digest != (v1.Hash{}) {
			b.WriteString("    digest: " + q(img.Digest.String()) + "\n")
		} else {
			b.WriteString("    newTag: " + q(img.Tag) + "\n")
		}
	}
	return []byte(b.String())
}
