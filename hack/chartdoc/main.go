// Command chartdoc writes the values table of a Helm chart's README.md from the
// comments of its values.yaml, so the table cannot drift from the values:
//
//	go run ./hack/chartdoc charts/perf-operator
//
// A comment directly above a key that starts with "-- " documents that key (its
// following comment lines continue the text); the key's default is its value in
// values.yaml. A documented map or list is one row; an undocumented map is
// descended into. Undocumented leaves are an error, so a new value cannot go
// into the chart without a description. The table replaces whatever stands
// between the README's "<!-- values:begin -->" and "<!-- values:end -->" lines.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

const (
	begin = "<!-- values:begin -->"
	end   = "<!-- values:end -->"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: chartdoc CHART_DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "chartdoc:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	values, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		return err
	}
	table, err := valuesTable(values)
	if err != nil {
		return err
	}
	readme := filepath.Join(dir, "README.md")
	old, err := os.ReadFile(readme)
	if err != nil {
		return err
	}
	out, err := splice(string(old), table)
	if err != nil {
		return fmt.Errorf("%s: %w", readme, err)
	}
	return os.WriteFile(readme, []byte(out), 0o644)
}

// splice puts the table between the README's markers.
func splice(readme, table string) (string, error) {
	i, j := strings.Index(readme, begin), strings.Index(readme, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("no %q ... %q lines to put the values table between", begin, end)
	}
	return readme[:i+len(begin)] + "\n" + table + readme[j:], nil
}

// row is one documented value.
type row struct{ key, typ, def, doc string }

// valuesTable renders the Markdown table of every documented value, in the
// order of the file.
func valuesTable(values []byte) (string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(values, &doc); err != nil {
		return "", err
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return "", errors.New("values.yaml is not a map")
	}
	var rows []row
	if err := walk(doc.Content[0], "", &rows); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("| Key | Type | Default | Description |\n| --- | --- | --- | --- |\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.key, r.typ, r.def, cell(r.doc))
	}
	return b.String(), nil
}

func walk(m *yaml.Node, prefix string, rows *[]row) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		key := prefix + k.Value
		text, documented := description(k.HeadComment)
		switch {
		case documented:
			def, err := defaultOf(v)
			if err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			*rows = append(*rows, row{key, typeOf(v), def, text})
		case v.Kind == yaml.MappingNode && len(v.Content) > 0:
			if err := walk(v, key+".", rows); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s (line %d) has no \"# -- description\" comment above it", key, k.Line)
		}
	}
	return nil
}

// description returns the text of a "# -- ..." comment block: its last
// paragraph (comments further up describe a section, not the key).
func description(comment string) (string, bool) {
	paras := strings.Split(strings.TrimSpace(comment), "\n\n")
	last := paras[len(paras)-1]
	var words []string
	documented := false
	for n, line := range strings.Split(last, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
		if n == 0 {
			if !strings.HasPrefix(line, "-- ") {
				return "", false
			}
			documented = true
			line = strings.TrimPrefix(line, "-- ")
		}
		words = append(words, line)
	}
	return strings.Join(words, " "), documented
}

func typeOf(v *yaml.Node) string {
	switch v.Kind {
	case yaml.MappingNode:
		return "object"
	case yaml.SequenceNode:
		return "list"
	}
	switch v.Tag {
	case "!!bool":
		return "bool"
	case "!!int":
		return "int"
	case "!!float":
		return "number"
	}
	return "string"
}

// defaultOf renders a value compactly, as JSON: one line in a table cell.
func defaultOf(v *yaml.Node) (string, error) {
	var x any
	if err := v.Decode(&x); err != nil {
		return "", err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(x); err != nil {
		return "", err
	}
	return "`" + strings.TrimSpace(b.String()) + "`", nil
}

// cell escapes what would break a Markdown table cell.
func cell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}
