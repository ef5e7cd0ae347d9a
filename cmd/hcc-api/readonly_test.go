package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeVerbs are the client methods that change the cluster, in clientsets,
// dynamic clients and controller-runtime alike.
var writeVerbs = map[string]bool{
	"Create": true, "Update": true, "UpdateStatus": true, "Patch": true,
	"Apply": true, "ApplyStatus": true, "Delete": true, "DeleteCollection": true,
	"Evict": true, "Bind": true,
}

// TestTheBinaryNeverWrites fails if hcc-api's own code calls a write verb
// on anything. The integration test proves the other half: the binary
// works under a Role that grants only get, list and watch.
func TestTheBinaryNeverWrites(t *testing.T) {
	var checked int
	for _, dir := range []string{".", "../../pkg/api"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			checked++
			src, err := os.ReadFile(path)
			require.NoError(t, err)
			f, err := parser.ParseFile(token.NewFileSet(), path, src, 0)
			require.NoError(t, err)
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && writeVerbs[sel.Sel.Name] {
					assert.Failf(t, "write verb", "%s calls .%s(", path, sel.Sel.Name)
				}
				return true
			})
		}
	}
	assert.Greater(t, checked, 5, "the source files were found")
}
