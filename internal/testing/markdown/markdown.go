// Package markdown reads what the tests of the documentation check in a
// Markdown file: its fenced code blocks (with the HTML comment that may
// mark each), its relative links and the anchors its headings get on
// GitHub. It reads the subset of Markdown this repository writes, not
// every document CommonMark allows.
package markdown

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
	"unicode"
)

// Doc is one Markdown file.
type Doc struct {
	Path     string
	Blocks   []Block
	Links    []Link
	Headings []string // the anchors of its headings, in order
	Prose    []Line   // every line outside fenced blocks
}

// Line is one line of a file.
type Line struct {
	N    int // from 1
	Text string
}

// Block is a fenced code block.
type Block struct {
	Line int    // the line of the opening fence, from 1
	Info string // the fence's info string: "yaml", "sh", ""
	// Marker is the HTML comment (without <!-- and -->, trimmed) on the
	// last non-blank line before the fence, if that line is one.
	Marker string
	// Text is the block's content, each line without the fence's
	// indentation and ending in a newline.
	Text string
}

// Link is an inline link [text](target) outside code.
type Link struct {
	Line   int
	Target string
}

// A fence opens or closes a block; an HTML comment alone on a line can mark
// the next block.
var (
	fence   = regexp.MustCompile("^( *)(```+)(.*)$")
	comment = regexp.MustCompile(`^<!--(.*)-->$`)
	heading = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	// link matches [text](target), the text holding no bracket; an image
	// ![alt](src) matches too, and its source is checked the same way.
	link = regexp.MustCompile(`\[[^\[\]]*\]\(([^()\s]+)\)`)
	// codeSpan is inline code: what it holds is not a link.
	codeSpan = regexp.MustCompile("`+[^`]*`+")
	// inlineLink is a link inside a heading, which the anchor reduces to
	// its text.
	inlineLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// Read parses the file at path.
func Read(path string) (*Doc, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, raw)
}

// Parse parses raw, read from path (which errors name).
func Parse(path string, raw []byte) (*Doc, error) {
	d := &Doc{Path: path}
	slugs := map[string]int{}
	var (
		open       *Block
		closing    string // the fence that closes open
		indent     string
		text       strings.Builder
		lastMarker string // the marker of the last non-blank line, if it was one
	)
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 1<<16), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if open != nil {
			if m := fence.FindStringSubmatch(line); m != nil && strings.TrimSpace(m[3]) == "" && len(m[2]) >= len(closing) {
				open.Text = text.String()
				d.Blocks = append(d.Blocks, *open)
				open = nil
				text.Reset()
				continue
			}
			text.WriteString(strings.TrimPrefix(line, indent) + "\n")
			continue
		}
		if m := fence.FindStringSubmatch(line); m != nil {
			open = &Block{Line: n, Info: strings.TrimSpace(m[3]), Marker: lastMarker}
			closing, indent = m[2], m[1]
			lastMarker = ""
			continue
		}
		d.Prose = append(d.Prose, Line{N: n, Text: line})
		trimmed := strings.TrimSpace(line)
		if trimmed == "" {
			continue
		}
		lastMarker = ""
		if m := comment.FindStringSubmatch(trimmed); m != nil {
			lastMarker = strings.TrimSpace(m[1])
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			d.Headings = append(d.Headings, anchor(m[2], slugs))
		}
		for _, m := range link.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			d.Links = append(d.Links, Link{Line: n, Target: m[1]})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if open != nil {
		return nil, fmt.Errorf("%s:%d: the fenced block is never closed", path, open.Line)
	}
	return d, nil
}

// HasAnchor reports whether a heading of d gets the anchor a.
func (d *Doc) HasAnchor(a string) bool {
	for _, h := range d.Headings {
		if h == a {
			return true
		}
	}
	return false
}

// anchor is the id GitHub gives a heading: its text as rendered
// (links and emphasis reduced to their text, code kept), lower case,
// without punctuation other than '-' and '_', spaces turned into '-'; a
// repeated anchor gets -1, -2, ... in order.
func anchor(title string, seen map[string]int) string {
	title = inlineLink.ReplaceAllString(title, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	a := b.String()
	if n := seen[a]; n > 0 {
		seen[a] = n + 1
		return fmt.Sprintf("%s-%d", a, n)
	}
	seen[a] = 1
	return a
}
