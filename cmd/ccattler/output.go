package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// Every command prints a table (or text) or, with -o json, JSON. The
// commands that show objects offer more, as kubectl does: yaml (the same
// document as the JSON, field for field), wide (the table with more
// columns) and name (kind/name, one a line, for xargs).
var richOutput = map[string][]string{
	"ccattler get":      {"yaml", "wide", "name"},
	"ccattler describe": {"yaml"},
}

// checkOutput refuses an --output the command cannot print, naming the
// ones it can.
func checkOutput(cmd *cobra.Command) error {
	ok := append([]string{"table", "json"}, richOutput[cmd.CommandPath()]...)
	if !slices.Contains(ok, g.output) {
		last := len(ok) - 1
		return usageError("--output %q: expected %s or %s", g.output, strings.Join(ok[:last], ", "), ok[last])
	}
	return nil
}

// printYAML writes v as YAML: its JSON encoding converted, so the field
// names, and the types, are those of -o json.
func printYAML(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	y, err := yaml.JSONToYAML(b)
	if err != nil {
		return fmt.Errorf("encode yaml: %w", err)
	}
	_, err = w.Write(y)
	return err
}
