package main

import (
	"os/exec"
	"strings"

	"github.com/sluice-rl/sluice/internal/procs"
)

// referenceModule is the reference's module path.
const referenceModule = "github.com/envoyproxy/ratelimit"

// referenceVersion names the reference binary's module and version, read
// from its build information.
func referenceVersion(bin string) string {
	if v := procs.ModuleVersion(bin, referenceModule); v != "" {
		return referenceModule + " " + v
	}
	return referenceModule + " (version unknown)"
}

// redisServerVersion is "redis-server 7.0.15" from redis-server --version.
func redisServerVersion() string {
	out, err := exec.Command("redis-server", "--version").Output()
	if err != nil {
		return "redis-server (version unknown)"
	}
	for f := range strings.FieldsSeq(string(out)) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return "redis-server " + v
		}
	}
	return "redis-server (version unknown)"
}
