package golden

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordingTB records failures instead of failing the test.
type recordingTB struct {
	testing.TB
	errors, fatals []string
}

func (tb *recordingTB) Errorf(format string, args ...any) {
	tb.errors = append(tb.errors, fmt.Sprintf(format, args...))
}

func (tb *recordingTB) FailNow() { tb.fatals = append(tb.fatals, "FailNow") }

func (tb *recordingTB) Fatalf(format string, args ...any) {
	tb.fatals = append(tb.fatals, fmt.Sprintf(format, args...))
}

func setUpdate(t *testing.T, v string) {
	require.NoError(t, flag.Set("update", v))
	t.Cleanup(func() { _ = flag.Set("update", "false") })
}

func TestFileComparesWithTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "testdata", "x.yaml")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte("a: 1\n"), 0o644))

	tb := &recordingTB{TB: t}
	File(tb, path, []byte("a: 1\n"))
	assert.Empty(t, tb.errors, "the same content passes")

	File(tb, path, []byte("a: 2\n"), "the %s interface is pinned", "container")
	require.Len(t, tb.errors, 1, "a difference fails")
	assert.Contains(t, tb.errors[0], path+": the container interface is pinned; run go test -update only for an intended change")
	assert.Empty(t, tb.fatals)

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "a: 1\n", string(data), "without -update the file is not written")
}

func TestFileFailsWithoutTheFile(t *testing.T) {
	tb := &recordingTB{TB: t}
	File(tb, filepath.Join(t.TempDir(), "missing.yaml"), []byte("a: 1\n"))
	assert.NotEmpty(t, tb.errors, "a missing file fails")
	assert.NotEmpty(t, tb.fatals, "a missing file fails")
}

func TestUpdateRewritesTheFile(t *testing.T) {
	setUpdate(t, "true")
	path := filepath.Join(t.TempDir(), "testdata", "x.yaml")
	tb := &recordingTB{TB: t}
	YAML(tb, path, map[string]int{"b": 2, "a": 1})
	assert.Empty(t, tb.errors)
	assert.Empty(t, tb.fatals)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "a: 1\nb: 2\n", string(data), "sigs.k8s.io/yaml, keys sorted")
}
