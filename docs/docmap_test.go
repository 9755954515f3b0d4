package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A package's doc.go is its map: it names every file of the package and what the file
// holds, so that a reader finds the code of a concept without grepping. A map that is not
// checked goes stale as files are added (the distributor's once left out its whole WAL
// mode), so these tests hold every doc.go of the repository to the files that exist.

// docMapMin is the number of non-test files from which a package must have a doc.go:
// below it the package comment of its one or two files is map enough.
const docMapMin = 3

// pathRun is a run of characters that can make up a file path in prose. A '*' is kept in
// the run so that a glob ("*_test.go") is seen whole and skipped, not read as a name.
var pathRun = regexp.MustCompile(`[\w./*-]+`)

// goNames returns the Go file names a comment mentions: bare base names ("wal_cycle.go")
// and paths with a slash ("internal/capture/slot.go", "../cmd/distributor/main.go"), each
// once, in order of first mention. A trailing full stop ends a sentence, not the name;
// globs and names that are only an extension (".go") are not names.
func goNames(text string) (bare, paths []string) {
	seen := map[string]bool{}
	for _, run := range pathRun.FindAllString(text, -1) {
		name := strings.TrimRight(run, ".")
		if !strings.HasSuffix(name, ".go") || strings.Contains(name, "*") || seen[name] {
			continue
		}
		base := name[strings.LastIndex(name, "/")+1:]
		if base == ".go" {
			continue
		}
		seen[name] = true
		if strings.Contains(name, "/") {
			paths = append(paths, name)
		} else {
			bare = append(bare, name)
		}
	}
	return bare, paths
}

// goPackage is what the checks need of one directory's Go files.
type goPackage struct {
	dir      string               // absolute
	files    []string             // the non-test .go files' base names, sorted
	comments map[string]string    // non-test file → its package comment, for files that have one
	parsed   map[string]*ast.File // every .go file of the directory, tests included
	fset     *token.FileSet
}

// readPackage parses the .go files of dir (nil if it has none).
func readPackage(dir string) (*goPackage, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	p := &goPackage{dir: dir, comments: map[string]string{}, parsed: map[string]*ast.File{}, fset: token.NewFileSet()}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") {
			continue
		}
		f, err := parser.ParseFile(p.fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		p.parsed[name] = f
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		p.files = append(p.files, name)
		if f.Doc != nil {
			p.comments[name] = f.Doc.Text()
		}
	}
	if len(p.parsed) == 0 {
		return nil, nil
	}
	slices.Sort(p.files)
	return p, nil
}

// exists reports whether a path named in a comment of dir leads to a file of the
// repository: relative to dir, to its module's root or to the repository's root.
func exists(root, module, dir, path string) bool {
	for _, base := range []string{dir, module, root} {
		file := filepath.Join(base, filepath.FromSlash(path))
		rel, err := filepath.Rel(root, file)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			continue
		}
		if st, err := os.Stat(file); err == nil && !st.IsDir() {
			return true
		}
	}
	return false
}

// checkMap returns what is wrong with the package map of p (module is the root of the Go
// module p belongs to): a missing doc.go, files its package comment does not name, names
// that lead to no file, and package comments outside doc.go.
func checkMap(root, module string, p *goPackage) []string {
	var bad []string
	doc, hasDoc := p.comments["doc.go"]
	if !slices.Contains(p.files, "doc.go") && len(p.files) >= docMapMin {
		bad = append(bad, "no doc.go for its "+strconv.Itoa(len(p.files))+" files")
	}
	if slices.Contains(p.files, "doc.go") && !hasDoc {
		bad = append(bad, "doc.go has no package comment")
	}
	var elsewhere []string
	for _, f := range p.files {
		if _, ok := p.comments[f]; ok && f != "doc.go" {
			elsewhere = append(elsewhere, f)
		}
	}
	if len(elsewhere) > 0 && (hasDoc || len(elsewhere) > 1) {
		bad = append(bad, "package comment outside doc.go (one per package, in doc.go): "+strings.Join(elsewhere, ", "))
	}
	if hasDoc {
		bare, _ := goNames(doc)
		var missing []string
		for _, f := range p.files {
			if f != "doc.go" && !slices.Contains(bare, f) {
				missing = append(missing, f)
			}
		}
		if len(missing) > 0 {
			bad = append(bad, "doc.go does not name: "+strings.Join(missing, ", "))
		}
	}
	// Every package comment, in doc.go or not, names only files that exist.
	for _, f := range p.files {
		text, ok := p.comments[f]
		if !ok {
			continue
		}
		bare, paths := goNames(text)
		var unknown []string
		for _, name := range bare {
			if _, ok := p.parsed[name]; !ok {
				unknown = append(unknown, name)
			}
		}
		for _, path := range paths {
			if !exists(root, module, p.dir, path) {
				unknown = append(unknown, path)
			}
		}
		if len(unknown) > 0 {
			bad = append(bad, f+" names files that do not exist: "+strings.Join(unknown, ", "))
		}
	}
	return bad
}

// outsideRef matches what a comment must not point to: documents that are not in the
// repository (a design file and a folder of papers kept beside it, and the shared folder
// they were in). The repository's docs stand on their own.
var outsideRef = regexp.MustCompile(`(?i)\bdesign\.md\b|\bseeds/|\.\./shared\b`)

// checkComments returns, as "file:line: text", every comment of p's files (tests included)
// that points outside the repository.
func checkComments(root string, p *goPackage) []string {
	var bad []string
	for _, name := range slices.Sorted(maps.Keys(p.parsed)) {
		for _, cg := range p.parsed[name].Comments {
			for _, c := range cg.List {
				if m := outsideRef.FindString(c.Text); m != "" {
					pos := p.fset.Position(c.Pos())
					rel, _ := filepath.Rel(root, pos.Filename)
					bad = append(bad, filepath.ToSlash(rel)+":"+strconv.Itoa(pos.Line)+": "+m)
				}
			}
		}
	}
	return bad
}

// skipDir reports whether the walk leaves out the directory rel (slash-separated, from the
// repository's root): tool and VCS state, fixtures, vendored and generated code, and the
// folders .gitignore keeps out of the repository (/bin/, /scratch/).
func skipDir(rel, name string) bool {
	switch {
	case strings.HasPrefix(name, "."), name == "testdata", name == "vendor", name == "node_modules":
		return true
	case rel == "schemas/gen", rel == "bin", rel == "scratch":
		return true
	}
	return false
}

// walkPackages calls fn for every Go package directory under root (every module: a
// nested go.mod starts a module of its own, and the walk goes into it).
func walkPackages(t *testing.T, root string, fn func(rel, module string, p *goPackage)) {
	t.Helper()
	modules := map[string]string{} // directory → its module's root
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if path != root && skipDir(rel, d.Name()) {
			return filepath.SkipDir
		}
		module := modules[filepath.Dir(path)]
		if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil || path == root {
			module = path
		}
		modules[path] = module
		p, err := readPackage(path)
		if err != nil {
			return err
		}
		if p != nil {
			fn(rel, module, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the repository root is not the docs folder's parent: %v", err)
	}
	return root
}

// TestPackageMaps: every doc.go of the repository names every non-test file of its
// package and no file that does not exist, and every package of docMapMin files or more
// has one.
func TestPackageMaps(t *testing.T) {
	root := repoRoot(t)
	var packages, docs int
	seen := map[string]bool{}
	walkPackages(t, root, func(rel, module string, p *goPackage) {
		packages++
		if slices.Contains(p.files, "doc.go") {
			docs++
		}
		seen[rel] = true
		for _, msg := range checkMap(root, module, p) {
			t.Errorf("%s: %s", rel, msg)
		}
	})
	// The walk must have seen the repository: enough packages, in each module, with the
	// maps it is meant to check.
	if packages < 40 || docs < 15 {
		t.Fatalf("found %d Go packages, %d with a doc.go, under %s; the walk is broken", packages, docs, root)
	}
	for _, want := range []string{"distributor", "distributor/internal/capture", "player", "cacheclient", "deploy/internal/ociimage", "cacheclient/e2e"} {
		if !seen[want] {
			t.Errorf("the walk did not reach %s", want)
		}
	}
	if seen["schemas/gen/statecast/v1"] {
		t.Error("the walk checked generated code (schemas/gen)")
	}
}

// TestNoOutsideReferences: no Go comment points to a document that is not in the
// repository (TestRepositoryLinks holds the Markdown's links to the repository's files).
func TestNoOutsideReferences(t *testing.T) {
	root := repoRoot(t)
	var files int
	walkPackages(t, root, func(rel, module string, p *goPackage) {
		files += len(p.parsed)
		for _, msg := range checkComments(root, p) {
			t.Errorf("%s: a comment points outside the repository; name a document of the repository (docs/architecture.md holds the guarantees) or state the fact", msg)
		}
	})
	if files < 200 {
		t.Fatalf("read %d Go files under %s; the walk is broken", files, root)
	}
}

func TestGoNames(t *testing.T) {
	text := `Files: wal.go (the mode), wal_cycle.go and wal_flush.go; see internal/capture/slot.go,
the command ../cmd/distributor/main.go and doc.go. Tests are *_test.go files, every
.go file counts, main.go's flags, pkg.go.dev/x and go.mod are no names; (lock.go),
"http.go", ` + "`topic.go`" + `; wal.go again.`
	bare, paths := goNames(text)
	wantBare := []string{"wal.go", "wal_cycle.go", "wal_flush.go", "doc.go", "main.go", "lock.go", "http.go", "topic.go"}
	wantPaths := []string{"internal/capture/slot.go", "../cmd/distributor/main.go"}
	if !slices.Equal(bare, wantBare) {
		t.Errorf("bare names %q, want %q", bare, wantBare)
	}
	if !slices.Equal(paths, wantPaths) {
		t.Errorf("paths %q, want %q", paths, wantPaths)
	}
}

func TestCheckMap(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module x\n")
	write("other/x.go", "package other\n")
	check := func(dir string) []string {
		t.Helper()
		p, err := readPackage(filepath.Join(root, dir))
		if err != nil || p == nil {
			t.Fatalf("readPackage(%s): %v, %v", dir, p, err)
		}
		return checkMap(root, root, p)
	}

	// A true map: every file named, names that exist, a sub-package and a path elsewhere.
	write("good/doc.go", "// Package good: a.go holds A, b.go and c.go hold B (tested in a_test.go);\n// sub/ is a sub-package; other/x.go is elsewhere.\npackage good\n")
	for _, f := range []string{"a.go", "b.go", "c.go", "a_test.go", "sub/s.go"} {
		write("good/"+f, "package good\n")
	}
	if bad := check("good"); len(bad) > 0 {
		t.Errorf("good: complaints %q, want none", bad)
	}

	// A stale map: c.go not named, gone.go and other/y.go do not exist, a second package
	// comment in a.go.
	write("stale/doc.go", "// Package stale: a.go, b.go, gone.go; other/y.go.\npackage stale\n")
	write("stale/a.go", "// Package stale, again.\npackage stale\n")
	write("stale/b.go", "package stale\n")
	write("stale/c.go", "package stale\n")
	want := []string{
		"package comment outside doc.go (one per package, in doc.go): a.go",
		"doc.go does not name: c.go",
		"doc.go names files that do not exist: gone.go, other/y.go",
	}
	if bad := check("stale"); !slices.Equal(bad, want) {
		t.Errorf("stale: complaints %q, want %q", bad, want)
	}

	// Three files and no doc.go; two files and no doc.go is fine.
	for _, f := range []string{"a.go", "b.go", "c.go"} {
		write("three/"+f, "package three\n")
	}
	if bad := check("three"); !slices.Equal(bad, []string{"no doc.go for its 3 files"}) {
		t.Errorf("three: complaints %q, want the missing doc.go", bad)
	}
	write("two/a.go", "// Package two does a.go and b.go's work.\npackage two\n")
	write("two/b.go", "package two\n")
	if bad := check("two"); len(bad) > 0 {
		t.Errorf("two: complaints %q, want none", bad)
	}

	// A comment that points outside the repository, in a test file too.
	write("refs/a.go", "// Package refs: as the design file says.\npackage refs\n")
	write("refs/a_test.go", "package refs\n\n// From ../../shared/"+"DESIGN.md and the table of "+"seeds/001.\nvar _ = 0\n")
	p, err := readPackage(filepath.Join(root, "refs"))
	if err != nil {
		t.Fatal(err)
	}
	if bad := checkComments(root, p); len(bad) != 1 || !strings.HasPrefix(bad[0], "refs/a_test.go:3: ") {
		t.Errorf("refs: complaints %q, want one for refs/a_test.go:3", bad)
	}
}
