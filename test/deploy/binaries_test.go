package deploy

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBinariesAreStaticAndTrimmed builds both binaries as `make build` and
// `make images` do (CGO_ENABLED=0, -trimpath) and checks what the images,
// which hold the binary alone, rely on: no program interpreter and no shared
// library, so the binary runs without a libc; and no path of the machine
// that built it. (hack/images's TestMakeImagesIsReproducible checks the
// binaries inside the images.)
func TestBinariesAreStaticAndTrimmed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both binaries (a minute or two)")
	}
	root := repoRoot(t)
	out := t.TempDir()
	for _, binary := range []string{"hcc-controller", "hcc-api"} {
		t.Run(binary, func(t *testing.T) {
			path := filepath.Join(out, binary)
			// go test puts its own toolchain first on the PATH of children.
			cmd := exec.Command("go", "build", "-trimpath", "-o", path, "./cmd/"+binary)
			cmd.Dir = root
			// The environment of go test, with cgo off as in the Makefile;
			// GOFLAGS could smuggle in other flags, so it is cleared.
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
			built, err := cmd.CombinedOutput()
			require.NoError(t, err, "go build: %s", built)

			f, err := elf.Open(path)
			require.NoError(t, err)
			defer f.Close()
			for _, p := range f.Progs {
				assert.NotEqual(t, elf.PT_INTERP, p.Type, "a dynamically linked binary: it names a program interpreter")
			}
			libs, err := f.ImportedLibraries() // the DT_NEEDED entries
			require.NoError(t, err)
			assert.Empty(t, libs, "shared libraries the binary needs")

			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.False(t, bytes.Contains(raw, []byte(root)), "the binary holds the build machine's path %s: -trimpath did not take effect", root)
		})
	}
}
