// Package golden compares a test's output with a file in testdata, and
// rewrites the file when the test runs with -update:
//
//	func TestBuildersGolden(t *testing.T) {
//		golden.YAML(t, "testdata/deployment.yaml", buildDeployment(server, testOptions),
//			"the container interface is pinned (docs/containers.md)")
//	}
//
//	go test ./pkg/controllers/mcpserver/ -run Golden -update # an intended change
//
// It registers the -update flag, so a test package that imports it must
// not declare its own. It is apart from kittest for that reason: a test
// package that imports kittest and still declares -update keeps working.
package golden

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// File fails t unless got is the content of the file at path, showing the
// difference. With -update it writes got there first. msgAndArgs (a format
// and its arguments) say what the file pins, for the failure message:
// "PATH: MESSAGE; run go test -update only for an intended change", as the
// builders' golden tests said it.
func File(t testing.TB, path string, got []byte, msgAndArgs ...any) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatalf("golden: %v", err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatalf("golden: %v", err)
		}
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to write %s", path)
	assert.Equal(t, string(want), string(got), "%s%s; run go test -update only for an intended change", path, why(msgAndArgs))
}

// YAML is File for obj marshalled as YAML (sigs.k8s.io/yaml, the form of
// the builders' golden files).
func YAML(t testing.TB, path string, obj any, msgAndArgs ...any) {
	t.Helper()
	got, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatalf("golden: %s: %v", path, err)
		return
	}
	File(t, path, got, msgAndArgs...)
}

// why is ": " and the message msgAndArgs format, or nothing.
func why(msgAndArgs []any) string {
	if len(msgAndArgs) == 0 {
		return ""
	}
	if format, ok := msgAndArgs[0].(string); ok {
		return ": " + fmt.Sprintf(format, msgAndArgs[1:]...)
	}
	return ": " + fmt.Sprint(msgAndArgs...)
}
