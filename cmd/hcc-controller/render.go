package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"

	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/render"
)

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// runRender is `hcc-controller render -f PATH [-f PATH]... [--resolve
// HOST=IP[,IP]]...`: the offline plan on stdout, notes on stderr, exit 1
// with one line on bad input.
func runRender(ctx context.Context, cmd command, args []string, stdout, stderr io.Writer) int {
	var files, resolves stringList
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Var(&files, "f", "a YAML file or a folder of them (recursive); repeatable")
	fs.Var(&resolves, "resolve", "HOST=IP[,IP]: answer lookups of HOST with these addresses; repeatable")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "%s: %s\n", cmd.name, strings.ReplaceAll(err.Error(), "\n", " "))
		return 1
	}
	if len(files) == 0 || fs.NArg() > 0 {
		return fail(errors.New("usage: render -f PATH [-f PATH]... [--resolve HOST=IP[,IP]]... (at least one -f)"))
	}
	overrides := map[string][]netip.Addr{}
	for _, r := range resolves {
		if err := render.ParseResolve(r, overrides); err != nil {
			return fail(err)
		}
	}
	cfg, err := config.Load(config.Render)
	if err != nil {
		return fail(fmt.Errorf("invalid configuration: %w", err))
	}
	out, err := render.Render(ctx, render.Options{
		Paths:     files,
		Overrides: overrides,
		Resolver:  net.DefaultResolver,
		Config:    cfg,
		Warn:      func(format string, a ...any) { fmt.Fprintf(stderr, "warning: "+format+"\n", a...) },
	})
	if err != nil {
		return fail(err)
	}
	_, _ = stdout.Write(out)
	return 0
}
