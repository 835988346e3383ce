package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/ncclhooks/ncclhooks/internal/backend/gpu"
	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/cuda"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

// archRE is a GPU architecture as NVRTC's --gpu-architecture takes it.
var archRE = regexp.MustCompile(`^sm_[1-9][0-9]{1,2}[af]?$`)

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
		return exitUsage
	}
	if code := needArgs(fs, stderr, 1, -1, "PROFILE"); code != exitOK {
		return code
	}
	switch *source {
	case "device", "auto":
	case "host":
		*noGPU = true
	default:
		fmt.Fprintf(stderr, "ncclhooks validate: --source %q: use device or host\n", *source)
		return exitUsage
	}
	// Refused even where no GPU check runs: a typo must not pass unseen.
	if *arch != "" && !archRE.MatchString(*arch) {
		fmt.Fprintf(stderr, "ncclhooks validate: --arch %q: give a GPU architecture as NVRTC names it, sm_ and its compute capability (sm_90, sm_100a)\n", *arch)
		return exitUsage
	}
	if *budget < gpu.MinRegisterBudget || *budget > 255 {
		fmt.Fprintf(stderr, "ncclhooks validate: --max-registers %d: allowed %d to 255 (the registers of the kernels that call the hook; NCCL's have %d)\n",
			*budget, gpu.MinRegisterBudget, gpu.DefaultRegisterBudget)
		return exitUsage
	}
	var lib *cuda.Lib
	if !*noGPU {
		var err error
		if lib, err = cuda.Open(); err != nil {
			if !quiet {
				fmt.Fprintf(stderr, "ncclhooks validate: note: registers, stack and calls not checked: %v (the plugin checks them at init)\n", err)
			}
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
			// Unreadable (2) outweighs invalid (1): the verdict is incomplete.
			rc = max(rc, profileError("validate", err, stderr))
			continue
		}
		m, err := hookgen.Generate(p)
		if err != nil {
			fmt.Fprintf(stderr, "ncclhooks validate: %s: %v\n", path, err)
			rc = max(rc, exitVerdict)
			continue
		}
		if *source == "host" {
			if err := config.CheckHostSource(p); err != nil {
				rc = max(rc, profileError("validate", err, stderr))
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
			fmt.Fprintf(stderr, "ncclhooks validate: %s: %v\n", path, err)
			rc = max(rc, exitVerdict)
			continue
		}
		for _, c := range checks {
			if c.Err != nil {
				fmt.Fprintf(stderr, "ncclhooks validate: %s: hook %q cannot be called safely from NCCL's kernels (%s, budget %d): %v\n",
					c.Pos, c.Hook, *arch, *budget, c.Err)
				rc = max(rc, exitVerdict)
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
		return exitUsage
	}
	if code := needArgs(fs, stderr, 1, 1, "PROFILE"); code != exitOK {
		return code
	}
	p, err := config.Load(fs.Arg(0))
	if err != nil {
		return profileError("gen", err, stderr)
	}
	m, err := hookgen.Generate(p)
	if err != nil {
		fmt.Fprintf(stderr, "ncclhooks gen: %s: %v\n", fs.Arg(0), err)
		return exitVerdict
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
		return exitNoVerdict
	}
	if !quiet {
		fmt.Fprintf(stdout, "wrote %s (%d lines)\n", *out, strings.Count(src, "\n"))
	}
	return 0
}
