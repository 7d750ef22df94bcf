package main

import (
	"strings"
	"testing"
)

func TestValuesTable(t *testing.T) {
	got, err := valuesTable([]byte(`# The file's header, not a key's.

# -- Replaces the name.
nameOverride: ""
# A section comment, then a documented leaf.
image:
  # -- The tag; empty means
  # the appVersion.
  tag: ""
# Section text.

# -- Requests and limits | as a whole.
resources:
  limits: {cpu: 500m}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| `nameOverride` | string | `\"\"` | Replaces the name. |",
		"| `image.tag` | string | `\"\"` | The tag; empty means the appVersion. |",
		"| `resources` | object | `{\"limits\":{\"cpu\":\"500m\"}}` | Requests and limits \\| as a whole. |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, "resources.limits") {
		t.Errorf("a documented map is one row:\n%s", got)
	}
}

func TestUndocumentedKeyIsAnError(t *testing.T) {
	_, err := valuesTable([]byte("# -- Documented.\na: 1\nmonitoring:\n  # plain comment\n  enabled: false\n"))
	if err == nil || !strings.Contains(err.Error(), "monitoring.enabled (line 5)") {
		t.Fatalf("error %v, want one naming monitoring.enabled (line 5)", err)
	}
}

func TestSplice(t *testing.T) {
	got, err := splice("# T\n"+begin+"\nold\n"+end+"\ntail\n", "| new |\n")
	if err != nil || got != "# T\n"+begin+"\n| new |\n"+end+"\ntail\n" {
		t.Fatalf("splice = %q, %v", got, err)
	}
	if _, err := splice("no markers", ""); err == nil {
		t.Fatal("no markers: want an error")
	}
}
