package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clerum/hcc/hack/images/pack"
)

// TestMakeImagesIsReproducible runs `make images` twice, each into its own
// directories, so the second run builds all four binaries again: both runs
// must write the same bytes, every digest alike. It then opens each image
// and checks what it runs: the binary that run cross-built, for the
// image's platform, static, with the fallback roots linked and the commit
// the labels name.
//
// Cost: eight links, two packings and the checks, with -race. Measured on
// a warm build cache: 2m01s of CPU (5m48s wall on 2 cores shared with other
// builds). On a fresh cache the first run also compiles every package for
// arm64: a cold make images took 8m41s of CPU.
func TestMakeImagesIsReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both binaries for two platforms, twice")
	}
	root := repoRoot(t)
	tmp := t.TempDir()
	makeImages := func(run string) (out, binDir string) {
		out, binDir = filepath.Join(tmp, run, "images"), filepath.Join(tmp, run, "bin")
		// make finds go on the PATH go test puts its own toolchain first on.
		cmd := exec.Command("make", "--no-print-directory", "-C", root, "images", "IMAGES_DIR="+out, "IMAGES_BIN_DIR="+binDir)
		output, err := cmd.CombinedOutput()
		require.NoError(t, err, "make images:\n%s", output)
		t.Logf("make images (%s):\n%s", run, output)
		return out, binDir
	}
	first, binDir := makeImages("first")
	second, _ := makeImages("second")

	assert.Equal(t, digestsOf(t, first), digestsOf(t, second), "two builds of one commit, two digests")
	a, b := treeDigests(t, first), treeDigests(t, second)
	var differ []string
	for path := range a {
		if a[path] != b[path] {
			differ = append(differ, path)
		}
	}
	for path := range b {
		if _, ok := a[path]; !ok {
			differ = append(differ, path)
		}
	}
	slices.Sort(differ)
	assert.Empty(t, differ, "two builds of one commit wrote these files differently, or only once")

	digests := digestsOf(t, first)
	for _, binary := range binaries {
		idx, _, err := pack.ReadLayout(filepath.Join(first, binary))
		require.NoError(t, err)
		d, err := idx.Digest()
		require.NoError(t, err)
		assert.Equal(t, digests[binary]["index"], d.String())
		im, err := idx.IndexManifest()
		require.NoError(t, err)
		require.Len(t, im.Manifests, 2)
		for _, desc := range im.Manifests {
			platform := desc.Platform.String()
			t.Run(binary+"/"+platform, func(t *testing.T) {
				assert.Equal(t, digests[binary][platform], desc.Digest.String())
				img, err := idx.Image(desc.Digest)
				require.NoError(t, err)
				inImage := onlyFile(t, img, binary)
				built, err := os.ReadFile(filepath.Join(binDir, desc.Platform.OS+"-"+desc.Platform.Architecture, binary))
				require.NoError(t, err)
				assert.True(t, bytes.Equal(built, inImage), "the image holds another binary than make images built")

				cf, err := img.ConfigFile()
				require.NoError(t, err)
				commit := cf.Config.Labels[pack.AnnotationRevision]
				require.Len(t, commit, 40, "the revision label is the commit's hash")
				assert.True(t, bytes.Contains(inImage, []byte(commit)), "the binary was not stamped with the commit its image names")
				checkELF(t, inImage, *desc.Platform)
				assert.FileExists(t, filepath.Join(first, binary+"-"+desc.Platform.OS+"-"+desc.Platform.Architecture+".tar"))
			})
		}
	}
}

// treeDigests maps every file under dir (slash-separated, relative) to the
// SHA-256 of its content.
func treeDigests(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		got[filepath.ToSlash(rel)] = fmt.Sprintf("%x", sha256.Sum256(raw))
		return nil
	}))
	require.NotEmpty(t, got)
	return got
}

// onlyFile returns the content of the one file in img, which must be
// binary at the root.
func onlyFile(t *testing.T, img v1.Image, binary string) []byte {
	t.Helper()
	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1)
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	require.NoError(t, err)
	assert.Equal(t, binary, hdr.Name)
	content, err := io.ReadAll(tr)
	require.NoError(t, err)
	_, err = tr.Next()
	require.Equal(t, io.EOF, err, "a second file in the image")
	return content
}

// checkELF: the binary is for the image's platform, static (no program
// interpreter, no shared library: the image has no libc) and links the
// fallback roots (the image has no certificate either).
func checkELF(t *testing.T, binary []byte, p v1.Platform) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(binary))
	require.NoError(t, err)
	defer f.Close()
	machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[p.Architecture]
	assert.Equal(t, machine, f.Machine, "the binary's architecture")
	for _, prog := range f.Progs {
		assert.NotEqual(t, elf.PT_INTERP, prog.Type, "a dynamically linked binary")
	}
	libs, err := f.ImportedLibraries()
	require.NoError(t, err)
	assert.Empty(t, libs)
	syms, err := f.Symbols()
	require.NoError(t, err)
	fallback := false
	for _, s := range syms {
		if strings.HasPrefix(s.Name, "golang.org/x/crypto/x509roots/fallback.") {
			fallback = true
			break
		}
	}
	assert.True(t, fallback, "golang.org/x/crypto/x509roots/fallback is not linked: on the empty base the binary would trust no certificate")
}
