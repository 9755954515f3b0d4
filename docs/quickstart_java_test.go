package docs

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/statecast/statecast/internal/testenv"
)

// javaQuickstart is docs/quickstart-java.md by role, in the doc's order.
type javaQuickstart struct {
	servers, demoLines, install, project, pom, code, run, output string
}

func parseJavaQuickstart(t *testing.T, doc string) javaQuickstart {
	t.Helper()
	var sh, text, xml, java []string
	for _, f := range fences(doc) {
		switch f.lang {
		case "sh":
			sh = append(sh, f.text)
		case "text":
			text = append(text, f.text)
		case "xml":
			xml = append(xml, f.text)
		case "java":
			java = append(java, f.text)
		default:
			t.Fatalf("docs/quickstart-java.md: a block of language %q: the test runs sh blocks, writes the xml and java blocks and compares text blocks", f.lang)
		}
	}
	if len(sh) != 4 || len(text) != 2 || len(xml) != 1 || len(java) != 1 {
		t.Fatalf("docs/quickstart-java.md: %d sh, %d text, %d xml and %d java blocks; the test knows 4 sh (servers, install, project, run), 2 text, 1 xml and 1 java",
			len(sh), len(text), len(xml), len(java))
	}
	return javaQuickstart{servers: sh[0], demoLines: text[0], install: sh[1], project: sh[2], pom: xml[0], code: java[0], run: sh[3], output: text[1]}
}

// TestQuickstartJavaCode: the Java quick start shows examples/quickstart-java as it is.
func TestQuickstartJavaCode(t *testing.T) {
	doc, err := os.ReadFile("quickstart-java.md")
	if err != nil {
		t.Fatal(err)
	}
	q := parseJavaQuickstart(t, string(doc))
	for file, block := range map[string]string{
		"../examples/quickstart-java/pom.xml":                         q.pom,
		"../examples/quickstart-java/src/main/java/example/Main.java": q.code,
	} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != block {
			t.Errorf("docs/quickstart-java.md does not show %s as it is: copy the file into its block", file)
		}
	}
}

// TestQuickstartJava runs docs/quickstart-java.md as a reader with a clone does: step 1's
// demo in the clone (on the environment's PostgreSQL), step 2's install from the clone,
// steps 3 and 4 in a fresh folder outside the repository (the pom and the class from the
// doc's blocks, mvn compile exec:java with the player's address the demo printed), and
// compares the service's output with the doc's. Without java or mvn it skips, under CI it
// fails.
func TestQuickstartJava(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the demo and a Maven project (-short)")
	}
	for _, tool := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			if testenv.InCI() {
				t.Fatalf("%s not found (CI=true): install Java 17 and Maven", tool)
			}
			t.Skipf("%s not found: the Java quick start is not run", tool)
		}
	}
	dsn := testenv.PostgresDSN(t)
	doc, err := os.ReadFile("quickstart-java.md")
	if err != nil {
		t.Fatal(err)
	}
	q := parseJavaQuickstart(t, string(doc))
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	demo, playerAddr, _ := runDemoStep(t, ctx, root, q.servers, q.demoLines, dsn)
	dir := outsideDir(t, root)
	env := os.Environ()
	runBlock(t, ctx, dir, env, "step 2", strings.ReplaceAll(q.install, clonePath, root))
	cwd, _ := runBlock(t, ctx, dir, env, "step 3", q.project)
	if err := os.WriteFile(filepath.Join(cwd, "pom.xml"), []byte(q.pom), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cwd, "src", "main", "java", "example", "Main.java"), []byte(q.code), 0o644); err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`-Dexec\.args=\S+`)
	if !re.MatchString(q.run) {
		t.Fatalf("step 4 has no -Dexec.args=<address>: %q", q.run)
	}
	run := re.ReplaceAllLiteralString(q.run, "-Dexec.args="+playerAddr)
	_, out := runBlock(t, ctx, cwd, env, "step 4", run)
	// Maven writes colour resets even in batch mode; a terminal shows nothing of them.
	out = regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(out, "")
	if out != q.output {
		t.Errorf("step 4 printed:\n%s\nthe doc shows:\n%s", out, q.output)
	}
	demo.stop(t)
}
