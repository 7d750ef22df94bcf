package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoTemplateEngineLinked: the manager links no template engine. A template
// calls methods by name through reflection, and a binary that can do that keeps
// every exported method of every type it links (internal/k6's placeholders say
// what that cost: 47 MB instead of 36, docs/scale.md).
func TestNoTemplateEngineLinked(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}:{{range .Imports}} {{.}}{{end}}`, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, pkg := range []string{"text/template", "html/template"} {
		var importers []string
		for _, line := range strings.Split(string(out), "\n") {
			path, imports, _ := strings.Cut(line, ":")
			if strings.Contains(imports+" ", " "+pkg+" ") {
				importers = append(importers, path)
			}
		}
		if len(importers) > 0 {
			t.Errorf("the manager links %s (imported by %v): it keeps every exported method in the binary", pkg, importers)
		}
	}
}
