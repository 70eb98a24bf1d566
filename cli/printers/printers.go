// Package printers renders Strata objects for stratactl: aligned tables
// (kubectl's look: upper-case headers, columns three spaces apart, AGE as
// "5m"), and JSON or YAML.
package printers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"go.yaml.in/yaml/v3"
)

// Format is an output format (-o).
type Format string

// Output formats.
const (
	FormatTable Format = "table"
	FormatWide  Format = "wide"
	FormatJSON  Format = "json"
	FormatYAML  Format = "yaml"
)

// Formats lists the formats, for flag help.
var Formats = []Format{FormatTable, FormatWide, FormatJSON, FormatYAML}

// ParseFormat checks an -o value; "" is a table.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case "":
		return FormatTable, nil
	case FormatTable, FormatWide, FormatJSON, FormatYAML:
		return f, nil
	}
	return "", fmt.Errorf("output format %q is not one of table, wide, json, yaml", s)
}

// Structured reports whether f is JSON or YAML.
func (f Format) Structured() bool { return f == FormatJSON || f == FormatYAML }

// Table is rows under a header.
type Table struct {
	Header []string
	Rows   [][]string
}

// Write prints the table with its columns aligned. Cells must not hold
// tabs or newlines; Cell cleans them.
func (t Table) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.Header, "\t"))
	for _, r := range t.Rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// String returns the table as Write prints it.
func (t Table) String() string {
	var b strings.Builder
	_ = t.Write(&b)
	return b.String()
}

// Cell makes s safe for a table cell: one line without tabs, "-" when
// empty.
func Cell(s string) string {
	if s == "" {
		return "-"
	}
	return strings.NewReplacer("\t", " ", "\r\n", " ", "\n", " ").Replace(s)
}

// WriteJSON prints v as indented JSON.
func WriteJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding JSON: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteYAML prints v as YAML, its fields in the order of its JSON (name,
// kind, spec, ... rather than sorted), through the JSON encoding so that
// the field names are the API's.
func WriteYAML(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding YAML: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("encoding YAML: %w", err)
	}
	blockStyle(&doc)
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("encoding YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("encoding YAML: %w", err)
	}
	_, err = w.Write(out.Bytes())
	return err
}

// blockStyle drops the JSON styles (flow collections, quoted strings) that
// parsing JSON as YAML records, so that the encoder writes block YAML and
// quotes only the strings that need it. The encoder follows YAML 1.2;
// strings that YAML 1.1 readers (many tools still) take for booleans are
// quoted too.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		switch strings.ToLower(n.Value) {
		case "y", "n", "yes", "no", "on", "off":
			n.Style = yaml.DoubleQuotedStyle
		}
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// Write prints v in a structured format f; tables are the caller's.
func Write(w io.Writer, f Format, v any) error {
	switch f {
	case FormatJSON:
		return WriteJSON(w, v)
	case FormatYAML:
		return WriteYAML(w, v)
	}
	return fmt.Errorf("format %q is not JSON or YAML", f)
}

// StreamTable prints rows as they come, aligned to the widths of the
// header and of the rows it started with (text/tabwriter needs every row
// before it can print one). A later, wider cell pushes its own row only.
type StreamTable struct {
	w      io.Writer
	widths []int
}

// NewStreamTable prints the header and the first rows and returns the
// table to print more rows with. minWidths (optional, per column) leave
// room for the rows to come.
func NewStreamTable(w io.Writer, header []string, rows [][]string, minWidths ...int) (*StreamTable, error) {
	t := &StreamTable{w: w, widths: make([]int, len(header))}
	copy(t.widths, minWidths)
	for _, r := range append([][]string{header}, rows...) {
		for i, c := range r {
			if i < len(t.widths) {
				t.widths[i] = max(t.widths[i], len([]rune(c)))
			}
		}
	}
	if err := t.Row(header); err != nil {
		return nil, err
	}
	for _, r := range rows {
		if err := t.Row(r); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// Row prints one row.
func (t *StreamTable) Row(cells []string) error {
	var b strings.Builder
	for i, c := range cells {
		if i == len(cells)-1 {
			b.WriteString(c) // no padding after the last column
			break
		}
		b.WriteString(c)
		if i < len(t.widths) {
			b.WriteString(strings.Repeat(" ", max(t.widths[i]-len([]rune(c)), 0)+3))
		}
	}
	b.WriteByte('\n')
	_, err := io.WriteString(t.w, b.String())
	return err
}

// WriteJSONLine prints v as one line of JSON.
func WriteJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding JSON: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
