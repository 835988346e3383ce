package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ncclhooks/ncclhooks/internal/backend/gpu"
	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/cuda"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

func runValidate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	arch := fs.String("arch", "", "GPU architecture to check the hooks for (default: device 0's, else sm_90)")
	budget := fs.Int("max-registers", gpu.DefaultRegisterBudget, "registers a hook may use: those of the kernels that call it (NCCL_HOOKS_MAX_REGISTERS)")
	noGPU := fs.Bool("no-gpu-check", false, "skip compiling the hooks with NVRTC to check registers, stack and calls")
	source := fs.String("source", "device", "where the hooks' events come from (NCCL_HOOKS_SOURCE): device (NCCL's device hook) or host (NCCL's host events; refuses what they do not carry; no GPU check: the hooks run on the host)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: ncclhooks validate [flags] PROFILE...")
		fs.PrintDefaults()
	}
	if err := parseInterspersed(fs, args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	switch *source {
	case "device", "auto":
	case "host":
		*noGPU = true
	default:
		fmt.Fprintf(stderr, "validate: --source %q: use device or host\n", *source)
		return 2
	}
	var lib *cuda.Lib
	if !*noGPU {
		var err error
		if lib, err = cuda.Open(); err != nil {
			fmt.Fprintf(stdout, "note: registers, stack and calls not checked: %v (the plugin checks them at init)\n", err)
			lib = nil
		} else if *arch == "" {
			if *arch, err = lib.DeviceArch(0); err != nil {
				*arch = "sm_90"
			}
		}
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
		if *source == "host" {
			if err := config.CheckHostSource(p); err != nil {
				fmt.Fprintln(stderr, err)
				rc = 1
				continue
			}
		}
		fmt.Fprintf(stdout, "%s: ok: profile %q, %d hooks (%d enabled)\n", path, p.Name, len(p.Hooks), len(m.Hooks))
		for _, h := range m.Hooks {
			if h.Hook.DrainAggregates() {
				fmt.Fprintf(stdout, "  %-20s record %2d B (timestamp, funcId), %d slots, %s, positions: work, %d aggregates by the drain\n", h.Name,
					h.Layout.Bytes, h.Slots, h.Overflow, len(h.Hook.Aggregates))
				continue
			}
			if h.Work {
				implied := ""
				if len(h.Layout.Implied) > 0 {
					implied = " (workCounter from the position, not stored)"
				}
				fmt.Fprintf(stdout, "  %-20s record %2d B (%d fields), %d slots of %d B%s, %s, positions: work, %d aggregates\n", h.Name,
					h.Layout.Bytes, len(h.Layout.Fields), h.Slots, 8*h.Layout.SlotWords(), implied, h.Overflow, len(h.Hook.Aggregates))
				continue
			}
			fmt.Fprintf(stdout, "  %-20s record %2d B (%d fields), %d slots, %s, %d aggregates\n", h.Name,
				h.Layout.Bytes, len(h.Layout.Fields), h.Slots, h.Overflow, len(h.Hook.Aggregates))
		}
		if lib == nil {
			continue
		}
		checks, err := gpu.Verify(m, lib, *arch, gpu.Options{Budget: *budget})
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", path, err)
			rc = 1
			continue
		}
		for _, c := range checks {
			if c.Err != nil {
				fmt.Fprintf(stderr, "%s: hook %q cannot be called safely from NCCL's kernels (%s, budget %d): %v\n",
					c.Pos, c.Hook, *arch, *budget, c.Err)
				rc = 1
				continue
			}
			fmt.Fprintf(stdout, "  %-20s %s for %s: %s; callable from relocatable kernels with at least %d registers (budget %d)\n",
				c.Hook, "checked", *arch, c.Resources, c.Resources.Registers, *budget)
		}
	}
	return rc
}

func runGen(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "write the source to `FILE` instead of stdout")
	hooksOnly := fs.Bool("hooks", false, "only what the profile generates: leave out the prelude (intrinsics, division, atomics) that every module shares")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: ncclhooks gen PROFILE [-o FILE] [--hooks]")
		fs.PrintDefaults()
	}
	if err := parseInterspersed(fs, args); err != nil {
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
	src := m.Source
	if *hooksOnly {
		src = m.HooksSource()
	}
	if *out == "" {
		fmt.Fprint(stdout, src)
		return 0
	}
	if err := os.WriteFile(*out, []byte(src), 0o644); err != nil {
		fmt.Fprintf(stderr, "ncclhooks gen: %v\n", err)
		return 1
	}
	if !quiet {
		fmt.Fprintf(stdout, "wrote %s (%d lines)\n", *out, strings.Count(src, "\n"))
	}
	return 0
}
