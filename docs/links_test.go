// Package docs holds no code: its tests hold the repository's documentation to what the
// repository holds. links_test.go: the Markdown links to files that exist in the
// repository, so that a clone's documentation has no dead links. config_test.go: the
// configuration reference names every key the config types have, and no other.
// quickstart_test.go: the quick start shows the example's code as it is, and runs as
// written, for a reader with a clone, in a module of its own outside the repository;
// quickstart_java_test.go: the Java quick start likewise, in a Maven project of its own.
// docmap_test.go: every package's doc.go names the package's files and no other, and no
// Go comment points to a document outside the repository.
package docs

import (
	"bufio"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// link is a relative reference found in a Markdown file.
type link struct {
	line   int
	target string // as written
	code   bool   // a path in a code span (`../x`), not a link
}

var (
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+"[^"]*")?\s*\)`)
	refDef     = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	scheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// links returns the relative links of a Markdown text, outside fenced code blocks: inline
// links and images, reference definitions, and code spans that name a path above the
// file's folder (`../…`), which read as a path a reader will look for.
func links(text string) []link {
	var out []link
	fence := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		for _, span := range codeSpan.FindAllString(line, -1) {
			if p := strings.Trim(span, "` "); strings.HasPrefix(p, "../") {
				out = append(out, link{line: n, target: p, code: true})
			}
		}
		// A code span is no link, but it may be a link's text: [`x`](y).
		prose := codeSpan.ReplaceAllString(line, "x")
		for _, m := range inlineLink.FindAllStringSubmatch(prose, -1) {
			out = append(out, link{line: n, target: strings.Trim(m[1], "<>")})
		}
		if m := refDef.FindStringSubmatch(prose); m != nil {
			out = append(out, link{line: n, target: strings.Trim(m[1], "<>")})
		}
	}
	return out
}

// anchor is the GitHub anchor of a heading: lower case, punctuation dropped, spaces as
// hyphens.
func anchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ' || r == '-':
			b.WriteRune('-')
		case r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the anchors of a Markdown text's headings.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	fence := false
	for _, line := range strings.Split(text, "\n") {
		if t := strings.TrimLeft(line, " "); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fence = !fence
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil && !fence {
			out[anchor(m[1])] = true
		}
	}
	return out
}

// check resolves each relative link of the Markdown file path (inside root) and returns
// what is wrong with each that does not lead to a file or folder of root.
func check(root, path string, text string) []string {
	var bad []string
	for _, l := range links(text) {
		if scheme.MatchString(l.target) || strings.HasPrefix(l.target, "//") {
			continue // a URL, not a file
		}
		target, frag, _ := strings.Cut(l.target, "#")
		if p, err := url.PathUnescape(target); err == nil {
			target = p
		}
		where := path + ":" + strconv.Itoa(l.line) + ": " + l.target
		file := path
		if target != "" {
			file = filepath.Join(filepath.Dir(path), filepath.FromSlash(target))
			if filepath.IsAbs(target) {
				file = filepath.Join(root, filepath.FromSlash(target))
			}
		}
		rel, err := filepath.Rel(root, file)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			bad = append(bad, where+": outside the repository")
			continue
		}
		st, err := os.Stat(file)
		if err != nil {
			bad = append(bad, where+": no such file")
			continue
		}
		if frag != "" && !l.code && !st.IsDir() && strings.HasSuffix(file, ".md") {
			b, err := os.ReadFile(file)
			if err == nil && !anchors(string(b))[frag] {
				bad = append(bad, where+": no heading #"+frag)
			}
		}
	}
	return bad
}

func TestLinks(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"README.md", "docs/a.md", "docs/sub/b.md", "pkg/x.go"} {
		p := filepath.Join(root, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("# Top\n\n## Two words, here\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	doc := filepath.Join(root, "docs", "a.md")
	for _, tc := range []struct {
		md   string
		want string // "" = fine; else a substring of the complaint
	}{
		{"see [b](sub/b.md) and [x](../pkg/x.go)", ""},
		{"a folder: [pkg](../pkg/) and [`README.md`](../README.md)", ""},
		{"![img](sub/b.md \"title\")", ""},
		{"[web](https://example.com/x.md) [mail](mailto:a@b.c) [self](#top)", ""},
		{"[anchor](sub/b.md#two-words-here)", ""},
		{"[bad anchor](sub/b.md#nowhere)", "no heading #nowhere"},
		{"[dead](sub/c.md)", "no such file"},
		{"[up](../../outside.md)", "outside the repository"},
		{"the design is in `../../shared/DESIGN.md`", "outside the repository"},
		{"the paper in `../seeds/000_…`", "no such file"},
		{"[ref]: ../missing.md", "no such file"},
		{"```\n[in a fence](nowhere.md)\n```", ""},
		{"`[in code](nowhere.md)`", ""},
	} {
		bad := check(root, doc, tc.md)
		switch {
		case tc.want == "" && len(bad) > 0:
			t.Errorf("%q: complaints %v, want none", tc.md, bad)
		case tc.want != "" && (len(bad) != 1 || !strings.Contains(bad[0], tc.want)):
			t.Errorf("%q: complaints %v, want one containing %q", tc.md, bad, tc.want)
		}
	}
}

// TestRepositoryLinks checks every Markdown file of the repository.
func TestRepositoryLinks(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the repository root is not the docs folder's parent: %v", err)
	}
	var files int
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), ".md") {
			return nil
		}
		files++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, msg := range check(root, path, string(b)) {
			t.Errorf("%s", strings.Replace(msg, path, rel, 1))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 5 {
		t.Fatalf("found %d Markdown files under %s; the walk is broken", files, root)
	}
}
