// Package version owns the build's version string.
package version

import "runtime/debug"

// Version is set at build time with
// -ldflags "-X github.com/sluice-rl/sluice/internal/version.Version=v1.2.3".
var Version = ""

// String returns the version: the linker-set one, else the module version
// from the build info, else "dev".
func String() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
