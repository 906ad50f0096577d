package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The shell blocks (```sh, ```bash, ```console, ```shell) of README.md and
// docs/*.md. Each follows a line that classifies it:
//
//	<!-- snippet: run -->                 run against the doc's node
//	<!-- snippet: run; node FLAGS -->     the same, the node started with FLAGS
//	<!-- snippet: run-alone -->           run with no node of the test's (it starts its own)
//	<!-- snippet: check-only (REASON) --> not run, for REASON (needs kubectl, ...)
//
// Every block, whatever its kind, is checked: each `sluice` command line
// (./bin/sluice, sluice) names a subcommand, and its arguments parse with
// that subcommand's own flag set (every flag exists, every value parses);
// each `make` target exists in the Makefile. A block without the line, or
// a line without its block, fails TestDocShellBlocks, so a new block must
// be classified. The run kinds are run by docshell_run_test.go.

// shellBlock is one shell block of a doc.
type shellBlock struct {
	file   string   // relative to the repository's root
	line   int      // of the opening fence, counted from 1
	kind   string   // run, run-alone or check-only
	reason string   // check-only's reason
	node   []string // run: the doc node's extra flags
	text   string   // the block's lines, each ending in a newline
}

func (b shellBlock) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

var (
	snippetMarker = regexp.MustCompile(`^<!-- snippet: (run|run-alone|check-only)(?: \(([^)]+)\))?(?:; node (.+))? -->$`)
	shellFence    = regexp.MustCompile("^```(sh|bash|console|shell)\\s*$")
	anyFence      = regexp.MustCompile("^```")
	shellAssign   = regexp.MustCompile(`^[A-Za-z_]\w*=`)
)

// docShellBlocks returns the shell blocks of README.md and docs/*.md;
// problems are blocks without a marker, markers without a block, and
// markers that do not parse.
func docShellBlocks(t *testing.T) (blocks []shellBlock, problems []string) {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../README.md"}, files...)
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		bl, pr := parseShellBlocks(strings.TrimPrefix(path, "../../"), string(b))
		blocks, problems = append(blocks, bl...), append(problems, pr...)
	}
	return blocks, problems
}

// parseShellBlocks returns the shell blocks of the doc name and the
// problems of its snippet lines.
func parseShellBlocks(name, doc string) (blocks []shellBlock, problems []string) {
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(line, "<!-- snippet:") {
			m := snippetMarker.FindStringSubmatch(line)
			switch {
			case m == nil:
				problems = append(problems, fmt.Sprintf("%s:%d: %q is not <!-- snippet: run|run-alone|check-only (REASON)[; node FLAGS] -->", name, i+1, line))
			case i+1 >= len(lines) || !shellFence.MatchString(lines[i+1]):
				problems = append(problems, fmt.Sprintf("%s:%d: the snippet line is not followed by a shell block", name, i+1))
			case m[1] == "check-only" && m[2] == "":
				problems = append(problems, fmt.Sprintf("%s:%d: check-only needs its reason: <!-- snippet: check-only (needs ...) -->", name, i+1))
			case m[1] != "run" && m[3] != "":
				problems = append(problems, fmt.Sprintf("%s:%d: only a run block has a node", name, i+1))
			}
			continue
		}
		if !anyFence.MatchString(line) {
			continue
		}
		end := i + 1
		for end < len(lines) && lines[end] != "```" {
			end++
		}
		if shellFence.MatchString(line) {
			blk := shellBlock{file: name, line: i + 1, text: strings.Join(lines[i+1:end], "\n") + "\n"}
			var m []string
			if i > 0 {
				m = snippetMarker.FindStringSubmatch(lines[i-1])
			}
			if m == nil {
				problems = append(problems, fmt.Sprintf("%s:%d: a shell block without a <!-- snippet: run|run-alone|check-only (REASON) --> line before it", name, i+1))
			} else {
				blk.kind, blk.reason, blk.node = m[1], m[2], strings.Fields(m[3])
				blocks = append(blocks, blk)
			}
		}
		i = end
	}
	return blocks, problems
}

// Every shell block of the docs is classified, and every sluice and make
// command in it is one the tree has.
func TestDocShellBlocks(t *testing.T) {
	blocks, problems := docShellBlocks(t)
	for _, p := range problems {
		t.Error(p)
	}
	if len(blocks) < 20 {
		t.Fatalf("found %d shell blocks in README.md and docs/*.md, want 20 or more", len(blocks))
	}
	kinds := map[string]int{}
	checker := newCommandChecker(t)
	for _, b := range blocks {
		kinds[b.kind]++
		for _, err := range checker.block(b) {
			t.Errorf("%s: %v", b, err)
		}
	}
	t.Logf("%d shell blocks: %d run, %d run-alone, %d check-only; %d sluice command lines parsed", len(blocks), kinds["run"], kinds["run-alone"], kinds["check-only"], checker.sluices)
}

// commandChecker checks command lines against the CLI and the Makefile.
type commandChecker struct {
	ctx     context.Context
	targets map[string]bool
	flags   map[string]map[string]bool // subcommand -> flag -> takes a value
	sluices int                        // sluice command lines checked
}

func newCommandChecker(t *testing.T) *commandChecker {
	t.Helper()
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	c := &commandChecker{ctx: context.Background(), targets: map[string]bool{}, flags: map[string]map[string]bool{}}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`).FindAllStringSubmatch(string(mk), -1) {
		c.targets[m[1]] = true
	}
	return c
}

// block checks the sluice and make commands of b.
func (c *commandChecker) block(b shellBlock) []error {
	var errs []error
	vars := map[string]string{}
	for _, words := range shellCommands(commandText(b.text)) {
		if len(words) == 1 {
			if k, v, ok := strings.Cut(words[0], "="); ok && shellAssign.MatchString(words[0]) {
				vars[k] = v
				continue
			}
		}
		for len(words) > 0 && shellAssign.MatchString(words[0]) {
			words = words[1:] // VAR=value before a command
		}
		if len(words) == 0 {
			continue
		}
		switch cmd := words[0]; {
		case cmd == "make":
			for _, w := range words[1:] {
				if !strings.HasPrefix(w, "-") && !strings.Contains(w, "=") && !c.targets[w] {
					errs = append(errs, fmt.Errorf("make %s: the Makefile has no target %q", w, w))
				}
			}
		case cmd == "sluice" || strings.HasSuffix(cmd, "/sluice"):
			if err := c.sluice(expandTemplate(words[1:], vars)); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", strings.Join(words, " "), err))
			}
		}
	}
	return errs
}

// sluice checks one sluice command's arguments with the subcommand's own
// flag set: run with "-h" after them, it must stop at that -h (flag.ErrHelp),
// having parsed every flag before it. An argument that is not a flag stops
// the parse of the commands without a KEY, which then refuse it, so no
// command runs.
func (c *commandChecker) sluice(args []string) error {
	c.sluices++
	if len(args) == 0 {
		return errors.New("no subcommand")
	}
	i := slices.IndexFunc(commands, func(cmd command) bool { return cmd.name == args[0] })
	if i < 0 {
		return fmt.Errorf("no subcommand %q", args[0])
	}
	cmd := commands[i]
	if cmd.name == "version" {
		if len(args) > 1 {
			return fmt.Errorf("version takes no arguments, got %q", args[1:])
		}
		return nil
	}
	flags := c.flagsOf(cmd)
	if last := args[len(args)-1]; len(args) > 1 && strings.HasPrefix(last, "-") && !strings.Contains(last, "=") {
		if flags[strings.TrimLeft(last, "-")] {
			return fmt.Errorf("%s: no value", last) // it would take the -h
		}
	}
	var stderr bytes.Buffer
	err := cmd.run(c.ctx, append(slices.Clone(args[1:]), "-h"), io.Discard, &stderr)
	if !errors.Is(err, flag.ErrHelp) {
		msg, _, _ := strings.Cut(stderr.String(), "\n")
		return fmt.Errorf("does not parse: %v (%s)", err, msg)
	}
	return nil
}

// flagsOf lists cmd's flags from its -h, each with whether it takes a
// value (flag.PrintDefaults names a value's type; a bool flag has none).
func (c *commandChecker) flagsOf(cmd command) map[string]bool {
	if f, ok := c.flags[cmd.name]; ok {
		return f
	}
	var help bytes.Buffer
	_ = cmd.run(c.ctx, []string{"-h"}, io.Discard, &help)
	f := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)( \S+)?(\t|$)`).FindAllStringSubmatch(help.String(), -1) {
		f[m[1]] = m[2] != ""
	}
	c.flags[cmd.name] = f
	return f
}

// commandText is the shell text of a block: a console block's commands
// (its lines after "$ ", with their continuation lines), or the whole
// block.
func commandText(text string) string {
	if !strings.HasPrefix(text, "$ ") {
		return text
	}
	var b strings.Builder
	for _, step := range consoleSteps(text) {
		b.WriteString(step.cmd + "\n")
	}
	return b.String()
}

// consoleStep is one command of a console block and the output shown
// after it.
type consoleStep struct {
	cmd  string
	want []string
}

// consoleSteps splits a console block ("$ " before each command).
func consoleSteps(text string) []consoleStep {
	var steps []consoleStep
	cont := false
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		switch {
		case cont:
			steps[len(steps)-1].cmd += "\n" + line
		case strings.HasPrefix(line, "$ "):
			steps = append(steps, consoleStep{cmd: strings.TrimPrefix(line, "$ ")})
		case len(steps) > 0:
			steps[len(steps)-1].want = append(steps[len(steps)-1].want, line)
		}
		cont = strings.HasSuffix(line, "\\") && (cont || strings.HasPrefix(line, "$ "))
	}
	return steps
}

// expandTemplate fills a command line for checking: $NAME from the
// block's assignments, any other $NAME or $((...)) as 0 (a template's
// placeholder), and a template's optional [...] parts and a | b choices
// all kept (every flag named is checked).
func expandTemplate(words []string, vars map[string]string) []string {
	ref := regexp.MustCompile(`\$\(\([^)]*\)\)|\$\{?([A-Za-z_]\w*)\}?`)
	var out []string
	for _, w := range words {
		if w == "|" {
			continue
		}
		w = strings.TrimSuffix(strings.TrimPrefix(w, "["), "]")
		w = ref.ReplaceAllStringFunc(w, func(s string) string {
			if m := ref.FindStringSubmatch(s); m[1] != "" {
				if v, ok := vars[m[1]]; ok {
					return v
				}
			}
			return "0"
		})
		if w != "" {
			out = append(out, w)
		}
	}
	return out
}
