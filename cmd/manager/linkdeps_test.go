package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoTemplateEngineLinked: the manager links no template engine. A template
// calls methods by name through reflection, and a binary that can do that keeps
// every exported method of every type it links: with text/template (the k6
// script, until internal/k6 filled its three placeholders itself) the manager
// was 47 MB instead of 36, and the binary's mapped pages are a third of the
// manager's RSS at 1,000 experiments (docs/scale.md).
func TestNoTemplateEngineLinked(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "text/template" || pkg == "html/template" {
			why, _ := exec.Command("go", "list", "-f", `{{.ImportPath}}: {{join .Imports " "}}`, "-deps", ".").Output()
			var importers []string
			for _, line := range strings.Split(string(why), "\n") {
				if strings.Contains(" "+line+" ", " "+pkg+" ") && !strings.HasPrefix(line, pkg+":") {
					importers = append(importers, strings.SplitN(line, ":", 2)[0])
				}
			}
			t.Errorf("the manager links %s (imported by %v): it keeps every exported method in the binary", pkg, importers)
		}
	}
}
