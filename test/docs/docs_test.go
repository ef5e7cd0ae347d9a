// Package docs checks the README and the pages of docs/: every relative
// link resolves, to a heading where it names one, and (with -tags
// integration) every YAML example is accepted by a real kube-apiserver
// with HCC's CRDs installed.
package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clerum/hcc/internal/testing/markdown"
)

// root is the repository, from this package's folder.
var root = filepath.Join("..", "..")

// documents are the README and every page of docs/, parsed.
func documents(t *testing.T) []*markdown.Doc {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, pages)
	var docs []*markdown.Doc
	for _, path := range append([]string{filepath.Join(root, "README.md")}, pages...) {
		d, err := markdown.Read(path)
		require.NoError(t, err)
		docs = append(docs, d)
	}
	return docs
}

// external is a link this test does not follow.
var external = regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`)

// TestLinksResolve: every relative link of the README and docs/ names a
// file or folder of the repository, and a #anchor names a heading of its
// page (as GitHub makes anchors).
func TestLinksResolve(t *testing.T) {
	docs := documents(t)
	parsed := map[string]*markdown.Doc{}
	for _, d := range docs {
		parsed[filepath.Clean(d.Path)] = d
	}
	absRoot, err := filepath.Abs(root)
	require.NoError(t, err)
	checked := 0
	for _, d := range docs {
		for _, l := range d.Links {
			if external.MatchString(l.Target) {
				continue
			}
			checked++
			where := fmt.Sprintf("%s:%d: %s", d.Path, l.Line, l.Target)
			file, frag, _ := strings.Cut(l.Target, "#")
			target := filepath.Clean(d.Path)
			if file != "" {
				target = filepath.Join(filepath.Dir(d.Path), file)
				abs, err := filepath.Abs(target)
				require.NoError(t, err)
				if !strings.HasPrefix(abs, absRoot+string(filepath.Separator)) {
					t.Errorf("%s: leaves the repository", where)
					continue
				}
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s: no such file", where)
					continue
				}
			}
			if frag == "" {
				continue
			}
			if filepath.Ext(target) != ".md" {
				t.Errorf("%s: an anchor into a file that is not Markdown", where)
				continue
			}
			page, ok := parsed[target]
			if !ok {
				page, err = markdown.Read(target)
				require.NoError(t, err)
				parsed[target] = page
			}
			assert.True(t, page.HasAnchor(frag), "%s: %s has no heading with the anchor #%s", where, target, frag)
		}
	}
	t.Logf("%d relative links in %d documents", checked, len(docs))
	assert.Greater(t, checked, 100, "the links were found")
}

// measurement is a figure with a unit of time or size.
var measurement = regexp.MustCompile(`\b\d+([.,]\d+)?\s?(ms|s|sec|seconds?|min|minutes?|h|hours?|[KMG]i?B)\b|\b\d+m\d+s\b`)

// TestReadmeHoldsNoMeasurements: timings and sizes live in
// docs/development.md and the pages they describe; the README's prose
// names none, so it cannot go stale. (Its blocks show output, which
// report_test.go of hack/run checks.)
func TestReadmeHoldsNoMeasurements(t *testing.T) {
	d, err := markdown.Read(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	for _, l := range d.Prose {
		if m := measurement.FindString(l.Text); m != "" {
			t.Errorf("README.md:%d: %q is a measurement; put it in docs/development.md", l.N, m)
		}
	}
}

// TestEveryPageIsIndexed: the README and docs/README.md each link every
// page of docs/, so a new page is found from the first screen.
func TestEveryPageIsIndexed(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	for _, index := range []string{filepath.Join(root, "README.md"), filepath.Join(root, "docs", "README.md")} {
		d, err := markdown.Read(index)
		require.NoError(t, err)
		linked := map[string]bool{}
		for _, l := range d.Links {
			file, _, _ := strings.Cut(l.Target, "#")
			if file != "" && !external.MatchString(file) {
				linked[filepath.Join(filepath.Dir(index), file)] = true
			}
		}
		for _, page := range pages {
			if page == index {
				continue
			}
			assert.True(t, linked[filepath.Clean(page)], "%s links %s", index, page)
		}
	}
}
