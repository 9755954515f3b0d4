package docs

import (
	"os"
	"strings"
	"testing"
)

// TestQuickstartCode: the quick start shows examples/quickstart/main.go as it is, so the
// code a reader copies is the code that builds (go build ./... compiles the example).
func TestQuickstartCode(t *testing.T) {
	doc, err := os.ReadFile("quickstart.md")
	if err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile("../examples/quickstart/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```go\n"+string(code)+"```\n") {
		t.Fatal("docs/quickstart.md does not show examples/quickstart/main.go as it is: copy the file into its go block")
	}
}
