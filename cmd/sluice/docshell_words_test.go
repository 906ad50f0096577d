package main

import (
	"reflect"
	"strings"
	"testing"
)

// shellCommands splits shell text into simple commands, each a list of
// words, as far as the docs' commands need: quotes ('...', "...", \x) are
// removed; a backslash-newline joins lines; # at a word's start comments
// to the line's end; newline, ;, &, &&, | and || end a command; $(...),
// <(...) and $((...)) stay inside their word; and in a template's [...]
// (a word starting with [ to one ending with ]) | is a word, the choice
// between alternatives. Variables are not expanded.
func shellCommands(text string) [][]string {
	var (
		cmds    [][]string
		words   []string
		word    strings.Builder
		inWord  bool
		parens  int // depth of $( <( inside the word
		bracket bool
	)
	endWord := func() {
		if !inWord {
			return
		}
		w := word.String()
		if strings.HasPrefix(w, "[") && !bracket {
			bracket = true
		}
		if strings.HasSuffix(w, "]") && bracket {
			bracket = false
		}
		words = append(words, w)
		word.Reset()
		inWord, parens = false, 0
	}
	endCmd := func() {
		endWord()
		if len(words) > 0 {
			cmds = append(cmds, words)
		}
		words = nil
	}
	r := []rune(text)
	for i := 0; i < len(r); i++ {
		ch := r[i]
		switch {
		case ch == '\\' && i+1 < len(r) && r[i+1] == '\n':
			i++ // a continuation: the next line goes on
		case ch == '\\' && i+1 < len(r):
			i++
			word.WriteRune(r[i])
			inWord = true
		case ch == '\'' || ch == '"':
			inWord = true
			for i++; i < len(r) && r[i] != ch; i++ {
				if ch == '"' && r[i] == '\\' && i+1 < len(r) {
					i++
				}
				word.WriteRune(r[i])
			}
		case parens > 0:
			word.WriteRune(ch)
			switch ch {
			case '(':
				parens++
			case ')':
				parens--
			}
		case (ch == '$' || ch == '<') && i+1 < len(r) && r[i+1] == '(':
			word.WriteRune(ch)
			word.WriteRune('(')
			inWord, parens = true, 1
			i++
		case ch == '#' && !inWord:
			for i < len(r) && r[i] != '\n' {
				i++
			}
			endCmd()
		case ch == '\n' || ch == ';' || ch == '&' || (ch == '|' && !bracket):
			endCmd()
			if i+1 < len(r) && (ch == '&' || ch == '|') && r[i+1] == ch {
				i++
			}
		case ch == ' ' || ch == '\t':
			endWord()
		default:
			word.WriteRune(ch)
			inWord = true
		}
	}
	endCmd()
	return cmds
}

func TestShellCommands(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want [][]string
	}{
		{"a b  c\n", [][]string{{"a", "b", "c"}}},
		{"a 'b c' \"d \\\"e\\\"\" f\\ g", [][]string{{"a", "b c", `d "e"`, "f g"}}},
		{"a \\\n  b # a comment\nc", [][]string{{"a", "b"}, {"c"}}},
		{"a && b; c & d | e || f", [][]string{{"a"}, {"b"}, {"c"}, {"d"}, {"e"}, {"f"}}},
		{"k --from-file=s=<(openssl rand -base64 32) x $((6+i))", [][]string{{"k", "--from-file=s=<(openssl rand -base64 32)", "x", "$((6+i))"}}},
		{"s [--a | --b c] | d", [][]string{{"s", "[--a", "|", "--b", "c]"}, {"d"}}},
		{"x=1 y\n\n", [][]string{{"x=1", "y"}}},
	} {
		if got := shellCommands(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("shellCommands(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestExpandTemplate(t *testing.T) {
	got := expandTemplate([]string{"--n", "b$i", "--g", "127.0.0.1:2794$((6+i))", "[--j", "$seeds]", "[--x", "|", "--y]", "--w", "${W}"},
		map[string]string{"seeds": "h:1,h:2"})
	want := []string{"--n", "b0", "--g", "127.0.0.1:27940", "--j", "h:1,h:2", "--x", "--y", "--w", "0"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("expandTemplate = %q, want %q", got, want)
	}
}

func TestConsoleSteps(t *testing.T) {
	got := consoleSteps("$ a \\\n  b\nout 1\n\nout 2\n$ c; echo \"exit $?\"\nexit 1\n")
	want := []consoleStep{{cmd: "a \\\n  b", want: []string{"out 1", "", "out 2"}}, {cmd: `c; echo "exit $?"`, want: []string{"exit 1"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("consoleSteps = %q, want %q", got, want)
	}
}

// The command check refuses what a doc could get wrong.
func TestDocCommandCheckRefuses(t *testing.T) {
	c := newCommandChecker(t)
	for _, tc := range []struct{ line, want string }{
		{"./bin/sluice check user:42 --limit 10 --period 1h", ""},
		{"sluice serve --insecure --join a:1,b:2 --store-max-bytes 512MiB", ""},
		{"sluice version", ""},
		{"make run test", ""},
		{"sluice chek user:42", `no subcommand "chek"`},
		{"sluice check user:42 --limt 10", "flag provided but not defined: -limt"},
		{"sluice check user:42 --limit ten", `invalid value "ten" for flag -limit`},
		{"sluice members --wait", "--wait: no value"},
		{"sluice serve --peer-timeout soon", `invalid value "soon" for flag -peer-timeout`},
		{"sluice serve extra --grpc-addr :1", "unexpected arguments"},
		{"sluice version --json", "takes no arguments"},
		{"make runn", `no target "runn"`},
	} {
		errs := c.block(shellBlock{file: "t.md", line: 1, text: tc.line + "\n"})
		switch {
		case tc.want == "" && len(errs) > 0:
			t.Errorf("%s: %v, want no error", tc.line, errs)
		case tc.want != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want)):
			t.Errorf("%s: %v, want one error with %q", tc.line, errs, tc.want)
		}
	}
}

func TestMissingLines(t *testing.T) {
	out := "HTTP/1.1 200 OK\r\nDate: now\r\nRatelimit-Reset: 1\r\n\r\n{\"reset_after\":\"600ms\"}\n"
	for _, tc := range []struct {
		want    []string
		missing string
	}{
		{[]string{"HTTP/1.1 200 OK", "Ratelimit-Reset: 1", "", `{"reset_after":"2s"}`}, ""},
		{[]string{"Ratelimit-Reset: 1", "HTTP/1.1 200 OK"}, "HTTP/1.1 200 OK"}, // out of order
		{[]string{"HTTP/1.1 429 Too Many Requests"}, "HTTP/1.1 429 Too Many Requests"},
		{[]string{"Ratelimit-Reset: 2"}, "Ratelimit-Reset: 2"},
	} {
		if got := missingLines(tc.want, out); got != tc.missing {
			t.Errorf("missingLines(%q) = %q, want %q", tc.want, got, tc.missing)
		}
	}
}

// A shell block must be classified, and a snippet line must be one and
// stand before its block.
func TestParseShellBlocksProblems(t *testing.T) {
	doc := strings.Join([]string{
		"<!-- snippet: run; node --rls-config x.yaml -->", "```sh", "sluice version", "```",
		"```sh", "sluice version", "```", // 5: no line
		"<!-- snippet: check-only -->", "```console", "$ kubectl get pods", "```", // 8: no reason
		"<!-- snippet: run-alone; node --insecure -->", "```bash", "true", "```", // 12: a node
		"<!-- snippet: runn -->", "```sh", "true", "```", // 16: no such kind
		"<!-- snippet: run -->", "", "```go", "```", // 20: not before a shell block
		"```yaml", "<!-- snippet: run -->", "```", // inside another block: not a snippet line
	}, "\n")
	blocks, problems := parseShellBlocks("d.md", doc)
	if len(blocks) != 3 || blocks[0].kind != "run" || !reflect.DeepEqual(blocks[0].node, []string{"--rls-config", "x.yaml"}) || blocks[0].line != 2 {
		t.Errorf("blocks %+v, want the run block at line 2 with its node flags, and two others", blocks)
	}
	want := []string{"d.md:5: a shell block without", "d.md:8: check-only needs its reason", "d.md:12: only a run block has a node",
		`d.md:16: "<!-- snippet: runn -->" is not`, "d.md:17: a shell block without", "d.md:20: the snippet line is not followed"}
	if len(problems) != len(want) {
		t.Fatalf("problems %q, want %d", problems, len(want))
	}
	for i, p := range problems {
		if !strings.HasPrefix(p, want[i]) {
			t.Errorf("problem %d: %q, want it to start %q", i, p, want[i])
		}
	}
}
