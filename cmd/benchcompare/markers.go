package main

import "strings"

// The markers around the generated sections of docs/benchmarks.md: the
// scenarios a-e, and the RLS scenarios f and g.
const (
	markerBegin    = "<!-- bench-compare:begin -->"
	markerEnd      = "<!-- bench-compare:end -->"
	rlsMarkerBegin = "<!-- bench-compare-rls:begin -->"
	rlsMarkerEnd   = "<!-- bench-compare-rls:end -->"
)

// replaceSection returns doc with the text between the markers replaced by
// section, every other byte unchanged. Without both markers (in order) it
// appends them, with the section, at the end.
func replaceSection(doc, section string) string {
	return replaceBetween(doc, markerBegin, markerEnd, section)
}

// replaceBetween is replaceSection with the markers markerBegin and
// markerEnd.
func replaceBetween(doc, markerBegin, markerEnd, section string) string {
	if !strings.HasSuffix(section, "\n") {
		section += "\n"
	}
	b := strings.Index(doc, markerBegin)
	if b >= 0 {
		from := b + len(markerBegin)
		if e := strings.Index(doc[from:], markerEnd); e >= 0 {
			return doc[:from] + "\n" + section + doc[from+e:]
		}
	}
	sep := ""
	switch {
	case doc == "":
	case strings.HasSuffix(doc, "\n\n"):
	case strings.HasSuffix(doc, "\n"):
		sep = "\n"
	default:
		sep = "\n\n"
	}
	return doc + sep + markerBegin + "\n" + section + markerEnd + "\n"
}
