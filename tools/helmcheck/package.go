package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
)

// errVersionMismatch is wrapped by packageChart's error for a chart whose
// version or appVersion is not the release's.
var errVersionMismatch = errors.New("helmcheck: chart version mismatch")

// runPackage is `helmcheck package --version X.Y.Z --out DIR CHART_DIR`:
// `helm package` with Helm's Go packages, for make release. The chart's
// Chart.yaml must already have version and appVersion X.Y.Z (the VERSION
// file's): the package is what is committed, never rewritten on the way.
func runPackage(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("helmcheck package", flag.ContinueOnError)
	fs.SetOutput(stderr)
	version := fs.String("version", "", "the release version, x.y.z: Chart.yaml's version and appVersion must be it (required)")
	out := fs.String("out", "", "the directory to write sluice-x.y.z.tgz into (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *version == "":
		return errors.New("helmcheck package: --version: is required")
	case *out == "":
		return errors.New("helmcheck package: --out: is required")
	case fs.NArg() != 1:
		return fmt.Errorf("helmcheck package: want one CHART_DIR, got %d arguments", fs.NArg())
	}
	path, err := packageChart(fs.Arg(0), *version, *out)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, path)
	return nil
}

// packageChart loads the chart in dir, checks that its version and
// appVersion are version, and saves it as a .tgz in out; it returns the
// file's path.
func packageChart(dir, version, out string) (string, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return "", fmt.Errorf("helmcheck package: load %s: %w", dir, err)
	}
	if v := ch.Metadata.Version; v != version {
		return "", fmt.Errorf("%w: %s/Chart.yaml: version is %q, the release is %q", errVersionMismatch, dir, v, version)
	}
	if v := ch.Metadata.AppVersion; v != version {
		return "", fmt.Errorf("%w: %s/Chart.yaml: appVersion is %q, the release is %q", errVersionMismatch, dir, v, version)
	}
	path, err := chartutil.Save(ch, out)
	if err != nil {
		return "", fmt.Errorf("helmcheck package: %w", err)
	}
	return path, nil
}
