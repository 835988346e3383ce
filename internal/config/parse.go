package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"
)

// Defaults and limits of the output section.
const (
	DefaultDumpDir      = "ncclhooks-out"
	DefaultDumpInterval = time.Second
	MinDumpInterval     = 10 * time.Millisecond
	MaxDumpInterval     = time.Hour
	DefaultRingCapacity = 1 << 16
	MinRingCapacity     = 1 << 10
	MaxRingCapacity     = 1 << 24
	DefaultSlots        = 4096
	// MaxProfileBytes is the most a profile and its includes may have in
	// all (an include read twice counts twice): profiles are a few KiB, and
	// a bigger file is a mistake (a log, a device) that must not cost the
	// job memory or time (parsing takes about a second per MiB).
	MaxProfileBytes = 1 << 20
	// MaxIncludes bounds the include files a profile reads, repeated ones
	// counted each time: includes that each include one file twice would
	// otherwise double the work per level.
	MaxIncludes = 64
	// MaxHooks bounds the enabled hooks: each runs on every event inside
	// NCCL's kernels and has its buffers on every device, and the module of
	// all of them is compiled during the job's init.
	MaxHooks = 64
)

// sizeAdvice says what to do about a profile over MaxProfileBytes.
const sizeAdvice = "profiles are a few KiB: check that this is a profile, and remove what its hooks do not need"

// Load reads, parses and validates the profile at path and the profiles it
// includes. Problems in the profile come back as an ErrorList.
func Load(path string) (*Profile, error) {
	data, err := readProfile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read profile: %w", err)
	}
	return Parse(path, data)
}

// Parse parses and validates a profile read from file. Includes are read
// from disk, relative to file's directory. It returns an ErrorList holding
// every problem found.
func Parse(file string, data []byte) (*Profile, error) {
	return (&loader{read: readProfile}).load(file, data)
}

// readProfile reads a profile file (the top-level one or an include). It
// refuses what is not a regular file and what is larger than
// MaxProfileBytes without reading it: a FIFO, a device (/dev/zero) or a huge
// file must neither hang nor exhaust the process that loads the plugin. The
// file is opened non-blocking (opening a FIFO for reading would wait for a
// writer) and checked on the open descriptor, so it cannot be swapped
// between the check and the read.
func readProfile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, fileKind(st.Mode()))
	}
	if st.Size() > MaxProfileBytes {
		return nil, fmt.Errorf("%s is %d bytes: a profile may have at most %d (%d KiB) with its includes; %s", path, st.Size(), MaxProfileBytes, MaxProfileBytes>>10, sizeAdvice)
	}
	// A file that grows after the check is still read only up to the limit.
	data, err := io.ReadAll(io.LimitReader(f, MaxProfileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxProfileBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes (%d KiB), the limit of a profile with its includes; %s", path, MaxProfileBytes, MaxProfileBytes>>10, sizeAdvice)
	}
	return data, nil
}

func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "not a regular file"
}

// loader assembles a profile from a file and its includes.
type loader struct {
	read  func(path string) ([]byte, error)
	errs  ErrorList
	confs exprConfigs
	// root is the top-level profile's directory, symlinks resolved: every
	// include must lie in it or below (includeRule).
	root     string
	hash     hash.Hash // of every file read, in order (Profile.Hash)
	total    int       // bytes of the files read so far
	included int       // include files read so far
	// overLimit: MaxIncludes or MaxProfileBytes was reached (and reported);
	// no further include is read.
	overLimit bool
}

var (
	profileNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
	identRE       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	sampleRE      = regexp.MustCompile(`^\s*1\s*/\s*([0-9]+)\s*$`)
)

func (l *loader) load(file string, data []byte) (*Profile, error) {
	p := &Profile{
		File:    file,
		Version: 1,
		Output:  Output{DumpDir: DefaultDumpDir, DumpInterval: DefaultDumpInterval, RingCapacity: DefaultRingCapacity},
	}
	if len(data) > MaxProfileBytes {
		l.errs.add(Pos{File: file, Line: 1, Col: 1}, "the profile is %d bytes: a profile may have at most %d (%d KiB) with its includes; %s", len(data), MaxProfileBytes, MaxProfileBytes>>10, sizeAdvice)
		return nil, l.errs.Err()
	}
	l.root = cleanPath(filepath.Dir(file))
	if r, err := filepath.EvalSymlinks(l.root); err == nil {
		l.root = r
	}
	l.total = len(data)
	l.hash = sha256.New()
	l.hash.Write(data)
	f := l.parseFile(file, data, nil)
	if f != nil {
		p.Name, p.Pos, p.Hooks = f.name, f.pos, f.hooks
		p.Output.Pos = f.pos
		if f.output != nil {
			p.Output = *f.output
		}
		if len(p.Hooks) == 0 && f.hooksOK && len(l.errs) == 0 {
			l.errs.add(f.pos, "the profile defines no hooks: add a hooks list with at least one hook")
		}
		l.checkProfile(p)
	}
	if err := l.errs.Err(); err != nil {
		return nil, err
	}
	p.Hash = hex.EncodeToString(l.hash.Sum(nil))
	return p, nil
}

// parsedFile is what one file contributes.
type parsedFile struct {
	name    string
	pos     Pos
	output  *Output // nil: not given
	hooks   []*Hook // included hooks first
	hooksOK bool    // false when the hooks section itself was broken (already reported)
}

var profileKeys = []string{"version", "name", "include", "output", "hooks"}

// parseFile decodes one file; chain is the include chain that led to it
// (cleaned paths), empty for the top-level profile.
func (l *loader) parseFile(file string, data []byte, chain []string) *parsedFile {
	if l.confs == nil {
		l.confs = exprConfigs{}
	}
	d := &doc{file: file, lines: strings.Split(string(data), "\n"), errs: &l.errs, confs: l.confs}
	top := Pos{File: file, Line: 1, Col: 1}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			l.errs.add(top, "the profile is empty: expected a mapping with version, name and hooks")
		} else {
			p := yamlSyntaxError(file, data, dec, err)
			l.errs.add(p.at, "%s", p.message())
		}
		return nil
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		d.errorf(&next, "a profile is one YAML document; remove this second document (or its --- separator)")
	} else if !errors.Is(err, io.EOF) {
		p := yamlSyntaxError(file, data, dec, err)
		l.errs.add(p.at, "%s", p.message())
	}
	n := &root
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			l.errs.add(top, "the profile is empty: expected a mapping with version, name and hooks")
			return nil
		}
		n = resolve(n.Content[0])
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		l.errs.add(top, "the profile is empty: expected a mapping with version, name and hooks")
		return nil
	}
	if n.Kind == yaml.ScalarNode {
		// Not a profile at all (a log, a credentials file named by
		// mistake): say what it is, never what it says.
		d.errorf(n, "a profile must be a mapping with keys %s; this file is a single value of %d characters: is it a profile?", strings.Join(profileKeys, ", "), len([]rune(n.Value)))
		return nil
	}
	m, ok := d.mapping(n, "a profile", profileKeys...)
	if !ok {
		return nil
	}
	f := &parsedFile{pos: d.pos(n), hooksOK: true}

	if v := m.get("version"); v == nil {
		d.errorf(n, `missing version: add "version: 1"`)
	} else if ver, ok := d.integer(v, "version", "1"); ok && ver != 1 {
		d.errorf(v, "version must be 1, the only profile version this ncclhooks reads; got %d", ver)
	}
	if v := m.get("name"); v == nil {
		d.errorf(n, `missing name: add a profile name such as "name: my-profile"`)
	} else if s, ok := d.str(v, "name"); ok {
		if !profileNameRE.MatchString(s) {
			d.errorf(v, "profile name %q may only use letters, digits, '_', '.' and '-'", s)
		}
		f.name = s
	}
	if v := m.get("output"); v != nil {
		if len(chain) > 0 {
			d.errorf(m.keys["output"], "an included profile cannot have an output section: output belongs to the top-level profile; move it there")
		} else {
			f.output = d.output(v)
		}
	}
	if v := m.get("include"); v != nil {
		f.hooks = append(f.hooks, l.includes(d, v, slices.Concat(chain, []string{cleanPath(file)}))...)
	}
	if v := m.get("hooks"); v == nil {
		if m.get("include") == nil {
			d.errorf(n, "missing hooks: add a list of hooks, each with a name and fields or aggregates")
			f.hooksOK = false
		}
	} else if items, ok := d.seq(v, "hooks", " of hooks (- name: ...)"); ok {
		if len(items) == 0 && m.get("include") == nil {
			d.errorf(v, "hooks is empty: add at least one hook")
			f.hooksOK = false
		}
		for _, it := range items {
			if h := d.hook(it); h != nil {
				f.hooks = append(f.hooks, h)
			}
		}
	} else {
		f.hooksOK = false
	}
	return f
}

func cleanPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return filepath.Clean(p)
}

// includes loads the profiles listed in v, relative to d's file, and
// returns their hooks in order.
func (l *loader) includes(d *doc, v *yaml.Node, chain []string) []*Hook {
	items, ok := d.seq(v, "include", " of profile files ([common.yaml])")
	if !ok {
		return nil
	}
	var hooks []*Hook
	for _, it := range items {
		rel, ok := d.str(it, "an include")
		if !ok {
			continue
		}
		path := rel
		if !filepath.IsAbs(path) {
			path = filepath.Join(filepath.Dir(d.file), rel)
		}
		if i := indexOf(chain, cleanPath(path)); i >= 0 {
			names := make([]string, 0, len(chain)-i+1)
			for _, c := range chain[i:] {
				names = append(names, filepath.Base(c))
			}
			d.errorf(it, "include cycle: %s -> %s; remove one of these includes", strings.Join(names, " -> "), filepath.Base(path))
			continue
		}
		if l.overLimit {
			return hooks // reported once
		}
		if l.included++; l.included > MaxIncludes {
			d.errorf(it, "this include is the profile's %dth; at most %d include files may be read in all (one included twice counts twice): include each file once", l.included, MaxIncludes)
			l.overLimit = true
			return hooks
		}
		resolved, why := l.includeRule(path)
		if why != "" {
			d.errorf(it, "include %q %s", rel, why)
			continue
		}
		// Read what was checked: a link in the path cannot be swapped in
		// between (positions keep the path as written).
		data, err := l.read(resolved)
		if err != nil {
			d.errorf(it, "cannot read include %q: %v", rel, err)
			continue
		}
		l.hash.Write(data)
		if l.total += len(data); l.total > MaxProfileBytes {
			d.errorf(it, "with include %q the profile reaches %d bytes: a profile may have at most %d (%d KiB) with its includes; %s", rel, l.total, MaxProfileBytes, MaxProfileBytes>>10, sizeAdvice)
			l.overLimit = true
			return hooks
		}
		if f := l.parseFile(path, data, chain); f != nil {
			hooks = append(hooks, f.hooks...)
		}
	}
	return hooks
}

// includeRule returns the file to read for an include of path, or why it
// may not be included. Profiles
// come from pull requests in CI (examples/ci), and NCCL_HOOKS_PROFILE is read
// with the job's rights: an include must not read the job's credentials
// (~/.aws/credentials, .git/config with a CI token, a key), whose content
// would then reach NCCL's log in an error. So an include is a .yaml or .yml
// file in the top-level profile's directory or below, with symlinks
// resolved (a link planted in the tree cannot point out of it), and no
// component of its path below that directory is hidden (.git, .ssh).
func (l *loader) includeRule(path string) (resolved, why string) {
	resolved, err := filepath.EvalSymlinks(cleanPath(path))
	if err != nil {
		return path, "" // the read names the problem
	}
	rel, err := filepath.Rel(l.root, resolved)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Sprintf("lies outside the profile's directory %s: includes must be files in the top-level profile's directory or below; move it there", l.root)
	}
	for _, c := range strings.Split(rel, string(filepath.Separator)) {
		if strings.HasPrefix(c, ".") {
			return "", fmt.Sprintf("is a hidden file or lies in a hidden directory (%s): includes are never read from hidden paths; rename it", c)
		}
	}
	if ext := filepath.Ext(resolved); ext != ".yaml" && ext != ".yml" {
		return "", "is not a .yaml or .yml file: includes must be profiles named NAME.yaml or NAME.yml"
	}
	return resolved, ""
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// yamlErrorPos extracts the line yaml.v3 names ("yaml: line 3: ..."); it
// gives no column, and omits the line when it is the first.
func yamlErrorPos(file string, err error) Pos {
	pos := Pos{File: file, Line: 1, Col: 1}
	var line int
	if _, e := fmt.Sscanf(err.Error(), "yaml: line %d:", &line); e == nil && line > 0 {
		pos.Line = line
	}
	return pos
}

var yamlPrefixRE = regexp.MustCompile(`^yaml: (line \d+: )?`)

func yamlErrorMsg(err error) string { return yamlPrefixRE.ReplaceAllString(err.Error(), "") }

var outputKeys = []string{"dump_dir", "dump_interval", "ring_capacity"}

func (d *doc) output(n *yaml.Node) *Output {
	o := &Output{DumpDir: DefaultDumpDir, DumpInterval: DefaultDumpInterval, RingCapacity: DefaultRingCapacity, Pos: d.pos(n)}
	m, ok := d.mapping(n, "output", outputKeys...)
	if !ok {
		return o
	}
	if v := m.get("dump_dir"); v != nil {
		if s, ok := d.str(v, "output.dump_dir"); ok {
			if strings.TrimSpace(s) == "" {
				d.errorf(v, "output.dump_dir is empty; name a directory (default %s)", DefaultDumpDir)
			} else {
				o.DumpDir = s
			}
		}
	}
	if v := m.get("dump_interval"); v != nil {
		allowed := fmt.Sprintf("a duration from %v to %v, such as 500ms or 2s", MinDumpInterval, MaxDumpInterval)
		dur, err := time.ParseDuration(v.Value)
		switch {
		case v.Kind != yaml.ScalarNode || err != nil:
			d.errorf(v, "output.dump_interval must be %s; got %s", allowed, describe(v))
		case dur < MinDumpInterval || dur > MaxDumpInterval:
			d.errorf(v, "output.dump_interval %v is out of range: use %s", dur, allowed)
		default:
			o.DumpInterval = dur
		}
	}
	if v := m.get("ring_capacity"); v != nil {
		if c, ok := d.powerOfTwo(v, "output.ring_capacity", MinRingCapacity, MaxRingCapacity); ok {
			o.RingCapacity = c
		}
	}
	return o
}

// powerOfTwo decodes a size that must be a power of two in [lo, hi].
func (d *doc) powerOfTwo(n *yaml.Node, what string, lo, hi int) (int, bool) {
	allowed := fmt.Sprintf("a power of two from %d to %d", lo, hi)
	v, ok := d.integer(n, what, allowed)
	switch {
	case !ok:
		return 0, false
	case v < int64(lo) || v > int64(hi):
		d.errorf(n, "%s %d is out of range: use %s", what, v, allowed)
		return 0, false
	case v&(v-1) != 0:
		d.errorf(n, "%s %d is not a power of two: use %s, such as %d", what, v, allowed, nextPowerOfTwo(v))
		return 0, false
	}
	return int(v), true
}

func nextPowerOfTwo(v int64) int64 {
	p := int64(1)
	for p < v {
		p <<= 1
	}
	return p
}

// checkProfile applies the rules that span hooks and files: unique hook
// names, and the aggregate budget of everything that will be generated.
func (l *loader) checkProfile(p *Profile) {
	first := map[string]*Hook{}
	for _, h := range p.Hooks {
		if f, dup := first[h.Name]; dup {
			l.errs.add(h.NamePos, "duplicate hook name %q (first defined at %s); hook names must be unique across the profile and its includes", h.Name, f.NamePos)
			continue
		}
		first[h.Name] = h
	}
	if hs := p.EnabledHooks(); len(hs) > MaxHooks {
		l.errs.add(hs[MaxHooks].NamePos, "this is the profile's enabled hook number %d; at most %d may be enabled (each runs on every event inside NCCL's kernels): merge hooks, as one hook can record fields and several aggregates, or disable some with enabled: false", MaxHooks+1, MaxHooks)
	}
	checkWorkPositions(p, &l.errs)
	cells := 0
	for _, h := range p.EnabledHooks() {
		for _, a := range h.Aggregates {
			n := a.Keys() * a.RowWords()
			cells += n
			if cells > MaxAggCells && cells-n <= MaxAggCells {
				l.errs.add(a.Pos, "aggregates need %d cells in all with this one (%d keys x %d words); at most %d: key fewer aggregates by both funcId and channelId, or use fewer histogram bounds", cells, a.Keys(), a.RowWords(), MaxAggCells)
			}
		}
	}
}
