package main

import (
	"io"
	"log/slog"
)

// logLevelUsage is the help text of every command's --log-level.
const logLevelUsage = "level of the components' own logs on stderr: debug, info, warn, error"

// newLogger returns a text logger writing to w at the level a --log-level
// flag names, or a usage error that quotes the flag's value.
func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError("--log-level %q: expected debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl})), nil
}
