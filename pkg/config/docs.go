package config

import (
	"bytes"
	_ "embed"
	"fmt"
	"strings"
)

// docsHeader opens docs/configuration.md and states the rules shared by every
// variable, so that the tables only say what differs.
//
//go:embed docs_header.md
var docsHeader string

// RenderMarkdown renders docs/configuration.md: the shared parsing rules, then
// one table per group of variables.
func RenderMarkdown() []byte {
	var b bytes.Buffer
	b.WriteString(docsHeader)
	for _, g := range groups {
		fmt.Fprintf(&b, "\n## %s\n\n", g.title)
		if g.note != "" {
			fmt.Fprintf(&b, "%s\n\n", g.note)
		}
		b.WriteString("| Variable | Default | Rule | Description |\n")
		b.WriteString("| --- | --- | --- | --- |\n")
		for _, v := range g.vars {
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", v.name, cell(v.shownDefault()), cell(v.field.rule), cell(v.description()))
		}
	}
	return b.Bytes()
}

func (v *variable) shownDefault() string {
	switch {
	case v.docDefault != "":
		return v.docDefault
	case v.def == "":
		return "(empty)"
	}
	return "`" + v.def + "`"
}

// description appends which binaries read the variable when not all do.
func (v *variable) description() string {
	if v.readBy == 0 {
		return v.desc
	}
	var readers []string
	for _, c := range []Component{Controller, API, Render} {
		if v.readBy.has(c) {
			readers = append(readers, c.String())
		}
	}
	return fmt.Sprintf("%s Read only by %s.", v.desc, strings.Join(readers, " and "))
}

// cell escapes the one character that would end a Markdown table cell.
func cell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}
