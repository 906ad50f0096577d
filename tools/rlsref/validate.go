package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// verdict is DIR/<case>/verdict.json: whether the reference's config
// checker (src/config_check_cmd, the reference's own loader) accepts the
// case's config directory, and what it said.
type verdict struct {
	Case      string `json:"case"`
	Reference string `json:"reference"`
	Accepted  bool   `json:"accepted"`
	// Message is the checker's last line of output (its error, with the
	// case's directory removed from file names), or "" when it accepts.
	Message string `json:"message,omitempty"`
}

// validate runs the reference's config checker on every case of dir (a
// directory <case>/config of YAML files each) and writes <case>/verdict.json.
func validate(ctx context.Context, dir, bin string, only []string, stderr io.Writer) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() || (len(only) > 0 && !contains(only, e.Name())) {
			continue
		}
		cfg := filepath.Join(dir, e.Name(), "config")
		if _, err := os.Stat(cfg); err != nil {
			return fmt.Errorf("%s: %w", e.Name(), err)
		}
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, "-config_dir", cfg)
		cmd.Stdout, cmd.Stderr = &out, &out
		runErr := cmd.Run()
		var exit *exec.ExitError
		if runErr != nil && !errors.As(runErr, &exit) {
			return fmt.Errorf("%s: %w", e.Name(), runErr)
		}
		v := verdict{Case: e.Name(), Reference: referenceVersion(bin), Accepted: runErr == nil}
		if !v.Accepted {
			v.Message = lastLine(strings.ReplaceAll(out.String(), cfg+string(filepath.Separator), ""))
		}
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name(), "verdict.json"), append(b, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "rlsref: %-45s accepted=%-5v %s\n", e.Name(), v.Accepted, v.Message)
		n++
	}
	if n == 0 {
		return fmt.Errorf("no cases in %s", dir)
	}
	return nil
}

// lastLine is s's last non-empty line, or its panic line if it panicked.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "panic: ") {
			return strings.TrimSpace(l)
		}
	}
	return strings.TrimSpace(lines[len(lines)-1])
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
