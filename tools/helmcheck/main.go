// Command helmcheck checks the Helm chart deploy/helm/sluice with Helm's
// own Go packages (helm.sh/helm/v4: the chart loader, the linter and the
// template engine), built from the Go module proxy in this nested module so
// that the main go.mod stays clean and no helm binary is needed:
//
//	make helm-check    # builds bin/helmcheck, runs its tests and it
//	bin/helmcheck --sluice bin/sluice deploy/helm/sluice
//
// For the chart's default values and for each values file of its ci/
// directory (ci/all-on-values.yaml turns every optional part on;
// cert-manager-values.yaml, existing-secrets-values.yaml and
// insecure-values.yaml are the security modes), it lints the chart (failing
// on a lint error or warning, as `helm lint --strict`), renders it as `helm
// template` would, decodes every manifest strictly into its Kubernetes API
// type (an unknown or misspelled field fails), and checks what a Sluice
// cluster needs of them (check.go) and its secure defaults (secure.go): the
// pod template against the restricted Pod Security Standard with Kubernetes'
// own k8s.io/pod-security-admission (pss.go), no service-account token,
// Guaranteed resources, GOMEMLIMIT at 90% of the memory limit, the cluster
// secret and certificates wired from Secrets that hold them. With --sluice,
// every SLUICE_* variable must be the twin of a `sluice serve` flag of that
// binary.
//
//	bin/helmcheck package --version 0.1.0 --out dist deploy/helm/sluice
//
// packages the chart as `helm package` does (package.go), for make release.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	chart "helm.sh/helm/v4/pkg/chart"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
)

// kubeVersion is the Kubernetes version the chart is linted and rendered
// for: its Chart.yaml's lowest (kubeVersion), the first with the preStop
// sleep action on by default.
const kubeVersion = "v1.30.0"

// quietHelm keeps Helm's log of template fail() calls (slog INFO) off
// stderr: the failures reach the caller as errors.
func quietHelm() {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

func main() {
	quietHelm()
	if len(os.Args) > 1 && os.Args[1] == "package" {
		if err := runPackage(os.Args[2:], os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	sluice := flag.String("sluice", "", "a sluice binary: check that every SLUICE_* variable is a `sluice serve` flag")
	show := flag.Bool("print", false, "print the rendered manifests of each value set")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: helmcheck [--sluice bin/sluice] CHART_DIR")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	var flags map[string]bool
	if *sluice != "" {
		var err error
		if flags, err = serveFlags(*sluice); err != nil {
			fmt.Fprintln(os.Stderr, "helmcheck:", err)
			os.Exit(1)
		}
	}
	cases, err := valueSets(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "helmcheck:", err)
		os.Exit(1)
	}
	failed := false
	for _, c := range cases {
		problems := checkChart(flag.Arg(0), c, flags, *show)
		for _, p := range problems {
			fmt.Printf("FAIL %s: %s\n", c.name, p)
		}
		if len(problems) == 0 {
			fmt.Printf("ok   %s: lint clean, rendered and checked\n", c.name)
		}
		failed = failed || len(problems) > 0
	}
	if failed {
		os.Exit(1)
	}
}

// valueSet is one rendering of the chart: a release and its values.
type valueSet struct {
	name    string // what the output calls it
	release string
	values  map[string]any // the user's values (nil: the chart's defaults)
}

// valueSets is the chart's defaults, as release "sluice", and each
// ci/*-values.yaml file, as release "edge" (so that names derived from the
// release are exercised too).
func valueSets(chartDir string) ([]valueSet, error) {
	sets := []valueSet{{name: "default values", release: "sluice"}}
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		v, err := loader.LoadValues(strings.NewReader(string(b)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		sets = append(sets, valueSet{name: filepath.Base(f), release: "edge", values: v})
	}
	return sets, nil
}

// checkChart lints, renders and checks the chart with one value set, and
// returns what is wrong.
func checkChart(chartDir string, vs valueSet, flags map[string]bool, show bool) []string {
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	const namespace = "sluice-system"
	res := lint.RunAll(chartDir, vs.values, namespace, lint.WithKubeVersion(kv))
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			problems = append(problems, "lint: "+m.Error())
		}
	}
	manifests, err := render(chartDir, vs, kv, nil)
	if err != nil {
		return append(problems, "render: "+err.Error())
	}
	if show {
		printManifests(vs, manifests)
	}
	objs, errs := decode(manifests)
	problems = append(problems, errs...)
	vals, err := effectiveValues(chartDir, vs)
	if err != nil {
		return append(problems, err.Error())
	}
	if vs.values == nil {
		problems = append(problems, checkDefaults(objs, vals)...)
	}
	return append(problems, check(objs, vals, flags)...)
}

// render runs Helm's template engine as `helm template` does, and returns
// the rendered files by name (NOTES.txt and the partials excluded). With a
// cluster, the templates' lookup calls read it, as in `helm upgrade`.
func render(chartDir string, vs valueSet, kv *common.KubeVersion, cluster engine.ClientProvider) (map[string]string, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	caps := *common.DefaultCapabilities
	caps.KubeVersion = *kv
	vals, err := util.ToRenderValues(ch, vs.values,
		common.ReleaseOptions{Name: vs.release, Namespace: "sluice-system", Revision: 1, IsInstall: true}, &caps)
	if err != nil {
		return nil, err
	}
	render := engine.Render
	if cluster != nil {
		render = func(ch chart.Charter, v common.Values) (map[string]string, error) {
			return engine.RenderWithClientProvider(ch, v, cluster)
		}
	}
	out, err := render(ch, vals)
	if err != nil {
		return nil, err
	}
	files := map[string]string{}
	for name, text := range out {
		if strings.HasSuffix(name, ".yaml") && strings.TrimSpace(text) != "" {
			files[name] = text
		}
	}
	return files, nil
}

// printManifests prints rendered files as `helm template` does.
func printManifests(vs valueSet, files map[string]string) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Printf("---\n# %s, %s\n%s\n", vs.name, n, strings.TrimSpace(files[n]))
	}
}

// effectiveValues is the chart's values.yaml with the value set's over it,
// as the templates saw them.
func effectiveValues(chartDir string, vs valueSet) (map[string]any, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	v, err := util.CoalesceValues(ch, vs.values)
	return map[string]any(v), err
}

// serveFlags lists the flags of `sluice serve -h`.
func serveFlags(bin string) (map[string]bool, error) {
	out, _ := exec.Command(bin, "serve", "-h").CombinedOutput() // -h exits 0 or 2 by flag package version
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if !flags["store-max-bytes"] || !flags["join"] {
		return nil, fmt.Errorf("could not read the flags of %s serve -h:\n%s", bin, out)
	}
	return flags, nil
}
