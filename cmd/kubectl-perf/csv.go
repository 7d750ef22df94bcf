package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// csvRows reads a CSV file whose header must be exactly want, and calls row for
// every record with its 1-based line number. Errors name the file, line and column.
func csvRows(path string, want []string, row func(line int, rec []string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1 // the header is checked by name below
	r.TrimLeadingSpace = true
	header, err := r.Read()
	if err != nil {
		return fmt.Errorf("%s: reading the header: %w", path, err)
	}
	if strings.Join(header, ",") != strings.Join(want, ",") {
		return fmt.Errorf("%s: header is %q, want %q", path, strings.Join(header, ","), strings.Join(want, ","))
	}
	r.FieldsPerRecord = len(want)
	for line := 2; ; line++ {
		rec, err := r.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := row(line, rec); err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
	}
}

// number parses a numeric column; empty is allowed only when optional.
func number(rec []string, col int, name string, optional bool) (float64, bool, error) {
	s := strings.TrimSpace(rec[col])
	if s == "" {
		if optional {
			return 0, false, nil
		}
		return 0, false, fmt.Errorf("column %s is empty", name)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false, fmt.Errorf("column %s: %q is not a number", name, s)
	}
	return v, true, nil
}
