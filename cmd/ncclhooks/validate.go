package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/ncclhooks/ncclhooks/config"
	"github.com/ncclhooks/ncclhooks/hookgen"
)

func runValidate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, "usage: ncclhooks validate PROFILE...") }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	rc := 0
	for _, path := range fs.Args() {
		p, err := config.Load(path)
		if err != nil {
			fmt.Fprintln(stderr, err)
			rc = 1
			continue
		}
		m, err := hookgen.Generate(p)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", path, err)
			rc = 1
			continue
		}
		fmt.Fprintf(stdout, "%s: ok: profile %q, %d hooks (%d enabled)\n", path, p.Name, len(p.Hooks), len(m.Hooks))
		for _, h := range m.Hooks {
			fmt.Fprintf(stdout, "  %-20s record %2d B (%d fields), %d slots, %s, %d aggregates\n", h.Name,
				h.Layout.Bytes, len(h.Layout.Fields), h.Slots, h.Overflow, len(h.Hook.Aggregates))
		}
	}
	return rc
}

func runGen(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, "usage: ncclhooks gen PROFILE") }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	p, err := config.Load(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	m, err := hookgen.Generate(p)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Arg(0), err)
		return 1
	}
	fmt.Fprint(stdout, m.Source)
	return 0
}
