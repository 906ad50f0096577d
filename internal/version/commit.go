package version

import "runtime/debug"

// Commit is set at build time with
// -ldflags "-X github.com/sluice-rl/sluice/internal/version.Commit=abc1234".
var Commit = ""

// CommitString returns the commit the binary was built from: the
// linker-set one, else the VCS revision in the build info (absent with
// -buildvcs=false), else "unknown".
func CommitString() string {
	if Commit != "" {
		return Commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				return s.Value
			}
		}
	}
	return "unknown"
}
