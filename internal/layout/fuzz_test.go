package layout

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestFuzzTargetsListed checks that every fuzz test of the module is in the
// Makefile's FUZZ_TARGETS, so that `make test` (fuzz-short) and `make fuzz`
// run it: a decoder of outside bytes added with a fuzz test that nothing
// runs would be fuzzed only by its seeds.
func TestFuzzTargetsListed(t *testing.T) {
	root := filepath.Join("..", "..")
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	in := false
	for _, line := range strings.Split(string(mk), "\n") {
		if strings.HasPrefix(line, "FUZZ_TARGETS") {
			in = true
			line = line[strings.Index(line, "=")+1:]
		}
		if !in {
			continue
		}
		for _, f := range strings.Fields(strings.TrimSuffix(line, "\\")) {
			listed[f] = true
		}
		if !strings.HasSuffix(strings.TrimSpace(line), "\\") {
			break
		}
	}
	fuzzFunc := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(`)
	found := 0
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "tools" || d.Name() == "bin" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		for _, m := range fuzzFunc.FindAllStringSubmatch(string(src), -1) {
			found++
			if target := filepath.ToSlash(rel) + ":" + m[1]; !listed[target] {
				t.Errorf("%s (%s) is not in the Makefile's FUZZ_TARGETS", target, path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatal("found no fuzz tests: the walk is broken")
	}
}
