package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"

	"github.com/ncclhooks/ncclhooks/internal/harness"
	"github.com/ncclhooks/ncclhooks/internal/report"
	"github.com/ncclhooks/ncclhooks/internal/schema"
)

// runFuncs lists NCCL's function names by id: those an output's header says
// the plugin resolved, or without an output the harness's own table (what
// ncclhooks run plays, modelled on NCCL's).
func runFuncs(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("funcs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "write JSON: [{\"id\":0,\"name\":\"...\"},...]")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: ncclhooks funcs [OUTPUT] [--json]

NCCL's device function names by id, as name predicates (func startsWith
"AllReduce") see them. With OUTPUT (a JSON lines file or a dump directory):
the names the plugin resolved from NCCL's ncclProfilerDevFuncName in that
job, from the header; without: the harness's table, which ncclhooks run plays.
Exit status: 0 done, 2 usage or input error.

`)
		fs.PrintDefaults()
	}
	if err := parseInterspersed(fs, args); err != nil {
		return 2
	}
	if code := needArgs(fs, stderr, 0, 1, "OUTPUT"); code != exitOK {
		return code
	}
	var names []string
	from := "the ncclhooks harness's table (ncclhooks run)"
	if fs.NArg() == 1 {
		var err error
		if names, from, err = headerFuncs(fs.Arg(0)); err != nil {
			fmt.Fprintln(stderr, "ncclhooks funcs:", err)
			return 2
		}
	} else {
		for id := 0; id < harness.FuncCount(); id++ {
			names = append(names, harness.FuncName(uint32(id)))
		}
	}
	if *asJSON {
		type fn struct {
			ID   int    `json:"id"`
			Name string `json:"name"`
		}
		out := []fn{}
		for id, n := range names {
			out = append(out, fn{id, n})
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			fmt.Fprintln(stderr, "ncclhooks funcs:", err)
			return 2
		}
		return 0
	}
	if !quiet {
		fmt.Fprintf(stdout, "%d function names, from %s\n", len(names), from)
	}
	g := [][]string{{"id", "name"}}
	for id, n := range names {
		g = append(g, []string{fmt.Sprint(id), n})
	}
	for _, r := range g {
		fmt.Fprintf(stdout, "%-4s  %s\n", r[0], r[1])
	}
	return 0
}

// headerFuncs reads the function names from the headers of an output's
// files; they must agree (one NCCL build per job).
func headerFuncs(path string) ([]string, string, error) {
	files, err := report.Expand([]string{path})
	if err != nil {
		return nil, "", err
	}
	var names []string
	for i, f := range files {
		h, err := readHeader(f)
		if err != nil {
			return nil, "", err
		}
		if i == 0 {
			names = h.Funcs
		} else if !slices.Equal(names, h.Funcs) {
			return nil, "", fmt.Errorf("%s and %s list different function names (two NCCL builds?): give one file", files[0], f)
		}
	}
	if len(names) == 0 {
		return nil, "", fmt.Errorf("%s: the header lists no function names (an output of an older ncclhooks, or NCCL without ncclProfilerDevFuncName)", files[0])
	}
	from := "the header of " + files[0]
	if len(files) > 1 {
		from = fmt.Sprintf("the headers of %d files in %s", len(files), path)
	}
	return names, from, nil
}

func readHeader(path string) (*schema.Header, error) {
	r, err := schema.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	line, err := bufio.NewReaderSize(r, 1<<16).ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var h schema.Header
	if err := json.Unmarshal(line, &h); err != nil || h.Type != schema.TypeHeader {
		return nil, fmt.Errorf("%s:1: not an ncclhooks header line", path)
	}
	return &h, nil
}
