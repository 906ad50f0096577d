package layout

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sluice-rl/sluice/"

// allowed lists, for each package of the module, the packages of the
// module it may import. A package missing here fails the test: a new
// package takes its place in the layers on purpose.
var allowed = map[string][]string{
	"bucket":                 nil,
	"ring":                   nil,
	"store":                  {"bucket"},
	"policy":                 {"bucket", "internal/watch"},
	"internal/identity":      nil,
	"internal/version":       nil,
	"internal/procs":         nil,
	"internal/grant":         nil,
	"internal/rlheader":      nil,
	"internal/plan":          nil,
	"internal/activity":      nil,
	"internal/tlsconfig":     nil,
	"internal/clustersecret": {"internal/keyfile", "internal/watch"},
	"internal/keyfile":       nil,
	"internal/logcap":        nil,
	"internal/testcerts":     nil,
	"internal/watch":         nil,
	"internal/persist":       {"bucket", "store"},
	"rls":                    {"internal/watch"},
	"rls/xds":                {"rls"},
	"rls/xds/xdstest":        nil,
	"internal/layout":        nil,
	"internal/wire":          {"bucket", "store", "proto/sluice/v1"},
	"limiter":                {"bucket", "ring", "store", "policy", "internal/activity", "internal/grant", "internal/identity"},
	"limiter/ownership":      {"ring"},
	"limiter/limitertest":    {"bucket", "ring", "store", "policy", "limiter", "internal/identity"},
	"cluster":                {"internal/keyfile"},
	"epoch":                  {"ring"}, // the agreed ring; node is its only intended importer
	"api":                    {"bucket", "ring", "store", "policy", "limiter", "rls", "internal/activity", "internal/logcap", "internal/rlheader", "internal/wire", "proto/sluice/v1"},
	"transport":              {"bucket", "ring", "store", "policy", "limiter", "internal/wire", "proto/sluice/v1"},
	"node": {"bucket", "ring", "store", "policy", "limiter", "rls", "rls/xds", "cluster", "epoch", "api", "transport", "internal/persist",
		"internal/activity", "internal/clustersecret", "internal/keyfile", "internal/logcap", "internal/tlsconfig", "internal/version", "internal/wire"},
	"client":            {"bucket", "ring", "internal/grant", "internal/identity", "internal/wire", "proto/sluice/v1"},
	"client/middleware": {"client", "internal/rlheader"},
	"internal/bench":    {"client"},
	"cmd/sluice": {"bucket", "client", "internal/bench", "internal/plan", "internal/tlsconfig", "internal/version", "internal/wire", "node",
		"policy", "proto/sluice/v1", "rls/xds"},
	"cmd/benchcompare": {"client", "internal/bench", "internal/procs", "internal/wire", "proto/sluice/v1"},
	"cmd/benchcheck":   nil,
	"proto/sluice/v1":  nil,
	"e2e":              nil,
	"deploy":           nil,
}

func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestImportsFlowOneWay checks every package's imports (tests excluded:
// a test may use a helper from anywhere below it, or the node above it).
func TestImportsFlowOneWay(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = repoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		pkg := strings.TrimPrefix(fields[0], module)
		may, known := allowed[pkg]
		if !known {
			t.Errorf("%s: not in the layout's table (internal/layout/layout_test.go): place it in the layers", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			dep, ours := strings.CutPrefix(imp, module)
			if ours && !slices.Contains(may, dep) {
				t.Errorf("%s imports %s, which the layers do not allow", pkg, dep)
			}
		}
	}
}

// TestNoLargeFiles keeps hand-written source files under 500 lines.
func TestNoLargeFiles(t *testing.T) {
	const most = 500
	root := repoRoot(t)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "bin" || strings.HasPrefix(name, ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		name := d.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || strings.HasSuffix(name, ".pb.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if n := bytes.Count(data, []byte("\n")); n >= most {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s has %d lines, at most %d: split it by concept", rel, n, most-1)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
