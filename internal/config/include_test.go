package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// secret stands for a credential the job can read: no error may echo it.
const secret = "ghp_Zx9SECRETtoken0123456789abcdefghijklmn"

// Includes read only profiles in the top-level profile's directory tree:
// files outside it (directly, or through a symlink planted in the tree),
// hidden paths and files that are not .yaml are refused unread; and no
// error quotes more than MaxQuoted characters of a file that is read.
func TestIncludesCannotReadCredentials(t *testing.T) {
	root := t.TempDir()
	home := filepath.Join(root, "home")
	prof := filepath.Join(root, "repo", "profiles")
	for path, text := range map[string]string{
		filepath.Join(home, "creds.yaml"):           "token: " + secret + "\n",
		filepath.Join(home, "credentials"):          "[default]\naws_secret_access_key = " + secret + "\n",
		filepath.Join(prof, ".git", "config.yaml"):  "extraheader: " + secret + "\n",
		filepath.Join(prof, "token"):                secret + "\n",
		filepath.Join(prof, "scalar.yaml"):          secret + "\n",
		filepath.Join(prof, "keyed.yaml"):           secret + ": 1\n",
		filepath.Join(prof, "sub", "fine.yaml"):     "version: 1\nname: fine\nhooks:\n  - {name: fine, fields: [phase]}\n",
		filepath.Join(prof, "sub", "nested.yaml"):   "version: 1\nname: nested\ninclude: [../fine2.yaml]\nhooks:\n  - {name: nested, fields: [phase]}\n",
		filepath.Join(prof, "fine2.yaml"):           "version: 1\nname: fine2\nhooks:\n  - {name: fine2, fields: [phase]}\n",
		filepath.Join(root, "repo", "sibling.yaml"): "version: 1\nname: sibling\nhooks:\n  - {name: sibling, fields: [phase]}\n",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(home, "creds.yaml"), filepath.Join(prof, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	// Inside the tree, also from an include below it, is fine.
	ok := filepath.Join(prof, "ok.yaml")
	if err := os.WriteFile(ok, []byte("version: 1\nname: ok\ninclude: [sub/fine.yaml, sub/nested.yaml]\nhooks:\n  - {name: main, fields: [phase]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if p, err := Load(ok); err != nil || len(p.Hooks) != 4 {
		t.Fatalf("includes inside the tree: %v", err)
	}

	for _, c := range []struct{ include, want string }{
		{"../../home/creds.yaml", "lies outside the profile's directory"},
		{filepath.Join(home, "creds.yaml"), "lies outside the profile's directory"},
		{"link.yaml", "lies outside the profile's directory"},
		{"../sibling.yaml", "lies outside the profile's directory"},
		{"../../home/credentials", "lies outside the profile's directory"},
		{".git/config.yaml", "hidden"},
		{"token", "is not a .yaml or .yml file"},
		{"scalar.yaml", fmt.Sprintf("this file is a single value of %d characters", len(secret))},
		{"keyed.yaml", fmt.Sprintf(`unknown key "%s... (%d characters)"`, secret[:MaxQuoted], len(secret))},
	} {
		t.Run(c.include, func(t *testing.T) {
			main := filepath.Join(prof, "main.yaml")
			text := "version: 1\nname: main\ninclude: ['" + c.include + "']\nhooks:\n  - {name: main, fields: [phase]}\n"
			if err := os.WriteFile(main, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(main)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want an error with %q, got %v", c.want, err)
			}
			if strings.Contains(err.Error(), secret[:MaxQuoted+1]) {
				t.Errorf("the error echoes the credential: %v", err)
			}
		})
	}
	// The top-level profile is the job's to name, but a credentials file
	// named by mistake is not echoed either.
	for _, f := range []string{"token", "keyed.yaml"} {
		_, err := Load(filepath.Join(prof, f))
		if err == nil || strings.Contains(err.Error(), secret[:MaxQuoted+1]) {
			t.Errorf("%s as the profile: %v", f, err)
		}
	}
}

// Every %q of a message is cut; other verbs and short tokens are kept.
func TestClipQuoted(t *testing.T) {
	var l ErrorList
	long := strings.Repeat("x", 100)
	l.add(Pos{File: "p.yaml", Line: 1, Col: 1}, "a %d%% %q b %s c %q", 5, long, long, "short")
	want := `p.yaml:1:1: a 5% "` + strings.Repeat("x", MaxQuoted) + `... (100 characters)" b ` + long + ` c "short"`
	if got := l.Error(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// A profile's Hash covers its includes: editing only an included file
// gives another hash, so that readers tell the two versions apart.
func TestHashCoversIncludes(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "main.yaml")
	inc := filepath.Join(dir, "inc.yaml")
	write := func(path, text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(main, "version: 1\nname: m\ninclude: [inc.yaml]\nhooks:\n  - {name: main, fields: [phase]}\n")
	hash := func() string {
		t.Helper()
		p, err := Load(main)
		if err != nil {
			t.Fatal(err)
		}
		return p.Hash
	}
	write(inc, "version: 1\nname: i\nhooks:\n  - {name: inc, fields: [phase]}\n")
	h1 := hash()
	write(inc, "version: 1\nname: i\nhooks:\n  - {name: inc, fields: [channelId]}\n")
	if h2 := hash(); h1 == h2 || len(h1) != 64 {
		t.Errorf("hash %q before and %q after editing the include: want two SHA-256s", h1, h2)
	}
}
