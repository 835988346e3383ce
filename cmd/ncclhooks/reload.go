package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ncclhooks/ncclhooks/internal/config"
	"github.com/ncclhooks/ncclhooks/internal/harness"
	"github.com/ncclhooks/ncclhooks/internal/hookgen"
)

// runReload asks a running job's plugin for a live reload: it finds the
// profile the process watches (NCCL_HOOKS_PROFILE and NCCL_HOOKS_RELOAD in
// /proc/PID/environ) and either writes PROFILE there, once it has checked
// that it loads and generates, or touches it so that it is read again. The
// plugin's watcher does the rest on its own goroutine; no signal is sent.
func runReload(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("reload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: ncclhooks reload PID [PROFILE]: write PROFILE (checked first) over the profile process PID watches, or make it read its profile again")
	}
	if err := parseInterspersed(fs, args); err != nil {
		return exitUsage
	}
	if code := needArgs(fs, stderr, 1, 2, "PID [PROFILE]"); code != exitOK {
		return code
	}
	watched, every, err := watchedProfile(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "ncclhooks reload:", err)
		return exitUsage
	}
	if fs.NArg() == 1 {
		now := time.Now()
		if err := os.Chtimes(watched, now, now); err != nil {
			fmt.Fprintln(stderr, "ncclhooks reload:", err)
			return exitNoVerdict
		}
		fmt.Fprintf(stdout, "touched %s: process %s reads it again within %v (its log says what became of it)\n", watched, fs.Arg(0), every)
		return exitOK
	}
	data, err := os.ReadFile(fs.Arg(1))
	if err != nil {
		fmt.Fprintln(stderr, "ncclhooks reload:", err)
		return exitUsage
	}
	if err := replaceProfile(watched, data); err != nil {
		var pe profileErr
		if errors.As(err, &pe) {
			return profileError("reload", pe.err, stderr)
		}
		fmt.Fprintln(stderr, "ncclhooks reload:", err)
		return exitNoVerdict
	}
	fmt.Fprintf(stdout, "wrote %s over %s: process %s switches to it within %v (its log and output say when)\n", fs.Arg(1), watched, fs.Arg(0), every)
	return exitOK
}

// watchedProfile is the profile process pid watches, and how often.
func watchedProfile(pid string) (string, string, error) {
	env, err := os.ReadFile(filepath.Join("/proc", pid, "environ"))
	if err != nil {
		return "", "", fmt.Errorf("process %s: %w", pid, err)
	}
	vars := map[string]string{}
	for _, kv := range bytes.Split(env, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok {
			vars[k] = v
		}
	}
	prof := vars["NCCL_HOOKS_PROFILE"]
	if prof == "" {
		return "", "", fmt.Errorf("process %s has no NCCL_HOOKS_PROFILE: it does not run the plugin with a profile", pid)
	}
	every := strings.ToLower(vars["NCCL_HOOKS_RELOAD"])
	switch every {
	case "", "0", "off":
		return "", "", fmt.Errorf("process %s was started without NCCL_HOOKS_RELOAD: it does not watch %s (start the job with NCCL_HOOKS_RELOAD=on)", pid, prof)
	case "1", "on":
		every = "250ms"
	}
	if !filepath.IsAbs(prof) {
		cwd, err := os.Readlink(filepath.Join("/proc", pid, "cwd"))
		if err != nil {
			return "", "", fmt.Errorf("process %s: its profile %s is relative and its working directory unknown: %w", pid, prof, err)
		}
		prof = filepath.Join(cwd, prof)
	}
	return prof, every, nil
}

// profileErr is a profile that does not load or generate.
type profileErr struct{ err error }

func (e profileErr) Error() string { return e.err.Error() }

// replaceProfile writes data over path in one rename, after checking that
// it loads and generates where it will lie (its includes are relative to
// that directory): a watcher never reads a half-written file.
func replaceProfile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".ncclhooks-reload-*.yaml")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if p, err := config.Load(tmp.Name()); err != nil {
		return profileErr{err}
	} else if _, err := hookgen.Generate(p); err != nil {
		return profileErr{err}
	}
	return os.Rename(tmp.Name(), path)
}

// writeProfileFile writes data over path in one rename, unchecked (run
// --reload-to: a profile that fails is part of what is tested).
func writeProfileFile(path string, data []byte) error {
	tmp := fmt.Sprintf("%s.%d.tmp", path, time.Now().UnixNano())
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// reloadRun is run --reload-to: the run's profile is a copy the plugin
// watches, and mid-run (the harness's MidRun) each target is written over
// it in turn, waiting each time for the plugin's verdict: a profile line
// in the output (its epoch is active and the previous one's final dump is
// written), or its reload WARN.
type reloadRun struct {
	watched string
	targets []string
	outDir  string
	log     strings.Builder // the plugin's log, taken while waiting
	stderr  io.Writer
}

// reloadTimeout bounds the wait for one reload's verdict.
const reloadTimeout = 2 * time.Minute

func (r *reloadRun) midRun() error {
	file := ""
	for _, target := range r.targets {
		data, err := os.ReadFile(target)
		if err != nil {
			return err
		}
		if file == "" {
			if file, err = harness.OutputFile(r.outDir, os.Getpid()); err != nil {
				return err
			}
		}
		// The plugin is writing the file: a read that ends inside a line
		// it is writing fails, and is tried again.
		before, err := harness.ReloadTimes(file)
		for try := 0; err != nil && try < 100; try++ {
			time.Sleep(5 * time.Millisecond)
			before, err = harness.ReloadTimes(file)
		}
		if err != nil {
			return err
		}
		warns := strings.Count(r.log.String(), "WARN ncclhooks: reload")
		start := time.Now()
		if err := writeProfileFile(r.watched, data); err != nil {
			return err
		}
		for {
			r.log.WriteString(harness.TakeLog())
			now, err := harness.ReloadTimes(file)
			if err == nil && len(now) > len(before) {
				if !quiet {
					fmt.Fprintf(r.stderr, "ncclhooks run: reloaded %s: %s\n", target, now[len(now)-1])
				}
				break
			}
			if strings.Count(r.log.String(), "WARN ncclhooks: reload") > warns {
				if !quiet {
					fmt.Fprintf(r.stderr, "ncclhooks run: reload to %s refused (the plugin's WARN below); the running profile stays\n", target)
				}
				break
			}
			if time.Since(start) > reloadTimeout {
				return fmt.Errorf("reload to %s: no profile line and no WARN after %v (last read of the output: %v)", target, reloadTimeout, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}

// printReloads prints when each epoch of the output became active.
func printReloads(w io.Writer, file string) {
	times, err := harness.ReloadTimes(file)
	if err != nil || len(times) == 0 {
		return
	}
	fmt.Fprintln(w)
	for _, t := range times {
		fmt.Fprintf(w, "reload: %s\n", t)
	}
}
