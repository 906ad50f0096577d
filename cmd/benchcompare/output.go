package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// writeJSON writes the report so far.
func (r *runner) writeJSON(rep *Report) error {
	if r.o.jsonOut == "" || rep == nil {
		return nil
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(r.o.jsonOut, b)
}

// writeOutputs writes the markdown sections, the headline and the plots:
// the section of a-e (and its plot and headline) when they ran, the RLS
// section of f and g (and its plot) when they ran, each between its own
// markers, so that a run of one kind leaves the other's figures alone.
func (r *runner) writeOutputs(rep *Report) error {
	targets := evaluateTargets(rep)
	fmt.Fprintln(r.stdout)
	for _, t := range targets {
		fmt.Fprintf(r.stdout, "target (%s) %s: %s: %s\n", t.Scenario, t.Name, t.Status, t.Measured)
	}
	var errs []error
	rls, other := rep.rlsScenarios()
	if other || len(rep.Memory) > 0 {
		main := rep.only(isNotRLS)
		errs = append(errs, r.writeSection(main, targetsOf(targets, false), r.o.svg, markerBegin, markerEnd, renderSection))
		if r.o.headline != "" {
			if err := writeFile(r.o.headline, []byte(renderHeadline(main))); err != nil {
				errs = append(errs, err)
			} else {
				r.logf("wrote %s", r.o.headline)
			}
		}
	}
	if rls {
		errs = append(errs, r.writeSection(rep.only(isRLS), targetsOf(targets, true), r.o.rlsSVG, rlsMarkerBegin, rlsMarkerEnd, renderRLSSection))
	}
	if r.o.jsonOut != "" {
		r.logf("wrote %s", r.o.jsonOut)
	}
	return errors.Join(errs...)
}

// writeSection draws rep's plot to svg (if not "") and splices the section
// render makes of rep between the markers of --out (if not "").
func (r *runner) writeSection(rep *Report, targets []Target, svg, begin, end string,
	render func(*Report, []Target, string) string) error {
	var errs []error
	svgLink := ""
	if svg != "" && len(rep.Results) > 0 && len(rep.Scenarios) > 0 {
		if err := writeLatencySVG(svg, rep); err != nil {
			errs = append(errs, fmt.Errorf("svg: %w", err))
		} else {
			svgLink = svg
			if r.o.out != "" {
				if rel, err := filepath.Rel(filepath.Dir(r.o.out), svg); err == nil {
					svgLink = filepath.ToSlash(rel)
				}
			}
			r.logf("wrote %s", svg)
		}
	}
	if r.o.out != "" {
		section := render(rep, targets, svgLink)
		doc, err := os.ReadFile(r.o.out)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		} else if err := writeFile(r.o.out, []byte(replaceBetween(string(doc), begin, end, section))); err != nil {
			errs = append(errs, err)
		} else {
			r.logf("wrote the %s section of %s", strings.TrimSuffix(strings.TrimPrefix(begin, "<!-- "), ":begin -->"), r.o.out)
		}
	}
	return errors.Join(errs...)
}

// targetsOf keeps the targets of the RLS scenarios (rls) or of the others.
func targetsOf(ts []Target, rls bool) []Target {
	var out []Target
	for _, t := range ts {
		if isRLSScenario(t.Scenario) == rls {
			out = append(out, t)
		}
	}
	return out
}

// isRLSScenario reports whether id is an RLS scenario.
func isRLSScenario(id string) bool {
	for _, sc := range scenarios {
		if sc.ID == id {
			return sc.RLS
		}
	}
	return false
}

// writeFile writes b to path through a temp file and a rename, making the
// directory if needed.
func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
