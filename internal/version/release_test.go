package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The files the release checks of tools/release.sh read.
var releaseFiles = []string{"VERSION", "CHANGELOG.md", "deploy/helm/sluice/Chart.yaml", "api/openapi.yaml"}

// releaseCheck runs `tools/release.sh check version` in dir.
func releaseCheck(t *testing.T, script, dir, version string, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("sh", script, "check", version)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "tag.gpgSign=false", "-c", "commit.gpgSign=false"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// TestReleaseChecks: the repository's VERSION, chart, OpenAPI version and
// CHANGELOG agree (make release-check passes, the tree's cleanliness
// aside), and the checks of make release refuse, naming the problem, a
// version that is not x.y.z, one other than the file's, a file that
// disagrees, a HEAD tagged with another version and a dirty tree. Run on
// a copy of those files in a git repository of its own.
func TestReleaseChecks(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "tools", "release.sh")
	v, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(v))
	if out, err := releaseCheck(t, script, root, version, "ALLOW_DIRTY=1"); err != nil {
		t.Fatalf("the repository's release files disagree: %v\n%s", err, out)
	}

	dir := t.TempDir()
	for _, f := range releaseFiles {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, dir, "init", "-q")
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-q", "-m", "release files")
	if out, err := releaseCheck(t, script, dir, version); err != nil {
		t.Fatalf("a clean copy: %v\n%s", err, out)
	}

	for _, tc := range []struct {
		name, version string
		want          string
	}{
		{"with a v", "v" + version, "want a semantic version x.y.z"},
		{"two parts", "1.2", "want a semantic version x.y.z"},
		{"leading zero", "01.2.3", "want a semantic version x.y.z"},
		{"empty", "", "want a semantic version x.y.z"},
		{"another version", "99.0.0", "differs from the file VERSION (" + version + ")"},
	} {
		out, err := releaseCheck(t, script, dir, tc.version)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("%s: check %q = %v, %q; want a refusal saying %q", tc.name, tc.version, err, out, tc.want)
		}
	}

	git(t, dir, "tag", "-a", "v99.0.0", "-m", "wrong")
	if out, err := releaseCheck(t, script, dir, version); err == nil || !strings.Contains(out, "HEAD is tagged v99.0.0, not v"+version) {
		t.Errorf("HEAD tagged v99.0.0: %v, %q; want a refusal naming the tag", err, out)
	}
	git(t, dir, "tag", "-d", "v99.0.0")
	git(t, dir, "tag", "-a", "v"+version, "-m", "right")
	if out, err := releaseCheck(t, script, dir, version); err != nil {
		t.Errorf("HEAD tagged v%s: %v\n%s", version, err, out)
	}

	chart := filepath.Join(dir, "deploy/helm/sluice/Chart.yaml")
	b, _ := os.ReadFile(chart)
	if err := os.WriteFile(chart, []byte(strings.Replace(string(b), "appVersion: \""+version+"\"", "appVersion: dev", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := releaseCheck(t, script, dir, version, "ALLOW_DIRTY=1"); err == nil || !strings.Contains(out, "appVersion is not "+version) {
		t.Errorf("a chart of appVersion dev: %v, %q; want a refusal naming appVersion", err, out)
	}
	if err := os.WriteFile(chart, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stray"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := releaseCheck(t, script, dir, version); err == nil || !strings.Contains(out, "uncommitted changes") {
		t.Errorf("a dirty tree: %v, %q; want a refusal", err, out)
	}
	if out, err := releaseCheck(t, script, dir, version, "ALLOW_DIRTY=1"); err != nil {
		t.Errorf("a dirty tree with ALLOW_DIRTY=1: %v\n%s", err, out)
	}
}
