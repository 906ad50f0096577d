package node

import (
	"context"

	"github.com/sluice-rl/sluice/api"
)

// The status page (/ui on the HTTP port): the members as this node sees
// them, its rate of checks and denials and its hot keys, which the limiter
// feeds into n.activity where it counts its check metrics.

// uiConfig is the status page's configuration.
func (n *Node) uiConfig() *api.UIConfig {
	keys := api.KeysLocal
	if n.cfg.UIKeys != "" {
		keys, _ = api.ParseKeyDisplay(n.cfg.UIKeys) // validated by Config.validate
	}
	return &api.UIConfig{Self: n.cfg.NodeName, Members: n.members, Activity: n.activity, Keys: keys, Insecure: n.auth == authInsecure, Configs: n.configStates}
}

// validUIKeys reports whether s is a Config.UIKeys.
func validUIKeys(s string) bool {
	_, err := api.ParseKeyDisplay(s)
	return err == nil
}

// activityLoop ticks the activity each interval, in real time: it closes
// an interval of the rate series (the checks of that second) and, every
// generation, rotates the hot keys.
func (n *Node) activityLoop(ctx context.Context) {
	every(ctx, n.activity.Interval, n.activity.Tick)
}
