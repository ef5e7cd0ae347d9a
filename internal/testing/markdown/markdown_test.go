package markdown

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sample = "# HCC — Host Context Controller\n" +
	"\n" +
	"See [the docs](docs/a.md#x), `[not](a link)` and ![pic](img.png).\n" +
	"\n" +
	"## The stdio bridge (`CONTEXT_MAPPER_STDIO_BRIDGE_IMAGE`)\n" +
	"## Removing the L0/L1 policies of a namespace\n" +
	"## [Linked](x.md) title\n" +
	"## Repeat\n" +
	"## Repeat\n" +
	"\n" +
	"<!-- example: not-applied (a fragment) -->\n" +
	"\n" +
	"```yaml\n" +
	"# a comment, not a heading\n" +
	"see: [x](inside.md)\n" +
	"```\n" +
	"\n" +
	"1. A step:\n" +
	"\n" +
	"   ```sh\n" +
	"   make run\n" +
	"     indented\n" +
	"   ```\n" +
	"<!-- a comment -->\n" +
	"text between\n" +
	"````\n" +
	"```\n" +
	"````\n"

func TestParse(t *testing.T) {
	d, err := Parse("sample.md", []byte(sample))
	require.NoError(t, err)

	assert.Equal(t, []string{
		"hcc--host-context-controller",
		"the-stdio-bridge-context_mapper_stdio_bridge_image",
		"removing-the-l0l1-policies-of-a-namespace",
		"linked-title",
		"repeat",
		"repeat-1",
	}, d.Headings, "GitHub's anchors; a # inside a block is no heading")
	assert.True(t, d.HasAnchor("repeat-1"))
	assert.False(t, d.HasAnchor("a-comment-not-a-heading"))

	assert.Equal(t, []Link{{Line: 3, Target: "docs/a.md#x"}, {Line: 3, Target: "img.png"}, {Line: 7, Target: "x.md"}}, d.Links,
		"links outside code spans and blocks")

	require.Len(t, d.Blocks, 3)
	assert.Equal(t, Block{Line: 13, Info: "yaml", Marker: "example: not-applied (a fragment)",
		Text: "# a comment, not a heading\nsee: [x](inside.md)\n"}, d.Blocks[0])
	assert.Equal(t, Block{Line: 20, Info: "sh", Text: "make run\n  indented\n"}, d.Blocks[1],
		"the fence's indentation is removed, the rest kept")
	assert.Equal(t, Block{Line: 26, Text: "```\n"}, d.Blocks[2],
		"a comment followed by text marks nothing; a longer fence holds a shorter one")
}

func TestParseRefusesAnOpenBlock(t *testing.T) {
	_, err := Parse("open.md", []byte("text\n```yaml\na: b\n"))
	assert.ErrorContains(t, err, "open.md:2")
}
