package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
)

// TestPackageChart: the chart packages at its own version, the archive
// loads with that version and appVersion, and another version is refused
// naming both.
func TestPackageChart(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	version := ch.Metadata.Version
	out := t.TempDir()
	path, err := packageChart(chartDir, version, out)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(out, "sluice-"+version+".tgz"); path != want {
		t.Fatalf("packaged as %s, want %s", path, want)
	}
	got, err := loader.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Metadata.Version != version || got.Metadata.AppVersion != version {
		t.Fatalf("the package has version %q, appVersion %q; want %q for both", got.Metadata.Version, got.Metadata.AppVersion, version)
	}

	_, err = packageChart(chartDir, "9.9.9", t.TempDir())
	if !errors.Is(err, errVersionMismatch) || !strings.Contains(err.Error(), `"9.9.9"`) || !strings.Contains(err.Error(), `"`+version+`"`) {
		t.Fatalf("packaging as 9.9.9: %v, want a version mismatch naming both", err)
	}
}

func TestPackageBadArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", "x", chartDir}, "--version"},
		{[]string{"--version", "0.1.0", chartDir}, "--out"},
		{[]string{"--version", "0.1.0", "--out", "x"}, "CHART_DIR"},
		{[]string{"--bogus"}, "bogus"},
	} {
		err := runPackage(tc.args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("package %v: %v, want an error naming %s", tc.args, err, tc.want)
		}
	}
	if _, err := os.Stat("x"); err == nil {
		t.Error("a refused package wrote x")
	}
}
