package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConfigurationDocIsCurrent(t *testing.T) {
	got, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	require.NoError(t, err)
	assert.Equal(t, string(RenderMarkdown()), string(got),
		"docs/configuration.md is stale; run: go run ./pkg/config/internal/gendocs")
}

// TestChosenDefaultsAreDocumented: the defaults the seed gave only by
// reference, which this project chose, are stated in docs/configuration.md
// (its header) and in the README (the contract's §6) as variables.go holds
// them, so neither can drift from the code.
func TestChosenDefaultsAreDocumented(t *testing.T) {
	chosen := []string{
		"CONTEXT_MAPPER_ALLOWED_IMAGE_PREFIXES",
		"CONTEXT_MAPPER_STDIO_BRIDGE_IMAGE",
		"CONTEXT_MAPPER_HOST_IMAGE",
		"CONTEXT_MAPPER_WFC_IMAGE",
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(docsHeader, "## Defaults this project chose\n")
	require.True(t, ok, "the header has the section the README links to")
	for _, name := range chosen {
		var def string
		for _, g := range groups {
			for _, v := range g.vars {
				if v.name == name {
					def = v.def
				}
			}
		}
		require.NotEmpty(t, def, "%s has a default", name)
		assert.True(t, strings.Contains(section, "`"+def+"`"), "docs/configuration.md states the default of %s, `%s`", name, def)
		assert.True(t, strings.Contains(string(readme), "`"+def+"`"), "the README states the default of %s, `%s`", name, def)
	}
}
