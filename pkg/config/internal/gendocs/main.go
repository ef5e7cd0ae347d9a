// Command gendocs writes docs/configuration.md from the variable table of
// package config. Run it from the repository root.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/clerum/hcc/pkg/config"
)

func main() {
	out := flag.String("o", "docs/configuration.md", "file to write")
	flag.Parse()
	if err := os.WriteFile(*out, config.RenderMarkdown(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}
