package config

import (
	"os"
	"path/filepath"
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
