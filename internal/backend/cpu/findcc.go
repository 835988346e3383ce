package cpu

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// FindCC resolves the C compiler the cpu backend runs, as the job's
// environment names it (NCCL_HOOKS_CC; "" means DefaultCC). The plugin runs
// it inside NCCL's init with the job's rights, so it is found safely:
//
//   - a name with a slash must be absolute: a relative one would depend on
//     the job's working directory;
//   - a bare name is looked up in PATH, where an entry that is empty or
//     relative (the job's working directory, or one below it) is skipped,
//     as is a candidate that another user could have planted or replaced:
//     one whose file, or the directory of its PATH entry, or the directory
//     its symbolic links lead to, is owned by neither root nor the plugin's
//     user, or is writable by group or others.
//
// It returns the absolute path to run and what it skipped (nil when
// nothing), or an error that says how to name the compiler.
func FindCC(name string) (path string, skipped []string, err error) {
	if name == "" {
		name = DefaultCC
	}
	if strings.ContainsRune(name, '/') {
		if !filepath.IsAbs(name) {
			return "", nil, fmt.Errorf("C compiler %q: give an absolute path (a relative one depends on the job's working directory)", name)
		}
		if !fileExecutable(name) {
			return "", nil, fmt.Errorf("C compiler %s cannot be run (no executable file there); install gcc or clang, or set NCCL_HOOKS_CC to a compiler's absolute path", name)
		}
		return name, nil, nil
	}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" || !filepath.IsAbs(dir) {
			if dir == "" {
				dir = "."
			}
			if fileExecutable(filepath.Join(dir, name)) {
				skipped = append(skipped, fmt.Sprintf("%s (PATH entry %q is relative: the working directory's)", filepath.Join(dir, name), dir))
			}
			continue
		}
		cand := filepath.Join(dir, name)
		if !fileExecutable(cand) {
			continue
		}
		if why := unsafeCandidate(dir, cand); why != "" {
			skipped = append(skipped, cand+" ("+why+")")
			continue
		}
		return cand, skipped, nil
	}
	if len(skipped) > 0 {
		return "", skipped, fmt.Errorf("C compiler %q: no safe one in PATH, skipped %s; set NCCL_HOOKS_CC to the compiler's absolute path", name, strings.Join(skipped, ", "))
	}
	return "", nil, fmt.Errorf("C compiler %q not found in PATH; install gcc or clang, or set NCCL_HOOKS_CC to a compiler's absolute path", name)
}

func fileExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// unsafeCandidate says why the compiler cand, found in PATH entry dir, could
// have been put there by someone other than root or this user ("" if not).
func unsafeCandidate(dir, cand string) string {
	real, err := filepath.EvalSymlinks(cand)
	if err != nil {
		return err.Error()
	}
	for _, c := range []struct{ what, path string }{
		{"its PATH entry", dir},
		{"the file", real},
		{"the file's directory", filepath.Dir(real)},
	} {
		if why := notOwnersOnly(c.path); why != "" {
			return c.what + " " + why
		}
	}
	return ""
}

// notOwnersOnly says why p could be changed by a user other than root or
// the effective user ("" if it cannot).
func notOwnersOnly(p string) string {
	st, err := os.Stat(p)
	if err != nil {
		return err.Error()
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return "has no owner to check"
	}
	if uid := int(sys.Uid); uid != 0 && uid != os.Geteuid() {
		return fmt.Sprintf("%s is owned by uid %d", p, uid)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return fmt.Sprintf("%s is writable by group or others (mode %v)", p, st.Mode().Perm())
	}
	return ""
}
