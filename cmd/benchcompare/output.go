package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// writeOutputs writes the markdown section, the headline and the plot.
func (r *runner) writeOutputs(rep *Report) error {
	targets := evaluateTargets(rep)
	fmt.Fprintln(r.stdout)
	for _, t := range targets {
		fmt.Fprintf(r.stdout, "target (%s) %s: %s: %s\n", t.Scenario, t.Name, t.Status, t.Measured)
	}
	var errs []error
	svgLink := ""
	if r.o.svg != "" && len(rep.Results) > 0 {
		if err := writeLatencySVG(r.o.svg, rep); err != nil {
			errs = append(errs, fmt.Errorf("svg: %w", err))
		} else {
			svgLink = r.o.svg
			if r.o.out != "" {
				if rel, err := filepath.Rel(filepath.Dir(r.o.out), r.o.svg); err == nil {
					svgLink = filepath.ToSlash(rel)
				}
			}
			r.logf("wrote %s", r.o.svg)
		}
	}
	if r.o.headline != "" {
		if err := writeFile(r.o.headline, []byte(renderHeadline(rep))); err != nil {
			errs = append(errs, err)
		} else {
			r.logf("wrote %s", r.o.headline)
		}
	}
	if r.o.out != "" {
		section := renderSection(rep, targets, svgLink)
		doc, err := os.ReadFile(r.o.out)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		} else if err := writeFile(r.o.out, []byte(replaceSection(string(doc), section))); err != nil {
			errs = append(errs, err)
		} else {
			r.logf("wrote the bench-compare section of %s", r.o.out)
		}
	}
	if r.o.jsonOut != "" {
		r.logf("wrote %s", r.o.jsonOut)
	}
	return errors.Join(errs...)
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
