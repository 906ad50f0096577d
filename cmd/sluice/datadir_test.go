package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

// `sluice serve` refuses a bad --data-sync-interval (or
// SLUICE_DATA_SYNC_INTERVAL) before it starts, naming the flag (or the
// variable).
func TestServeBadDataSyncInterval(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		env, want string
	}{
		{[]string{"--data-sync-interval", "0"}, "", "--data-sync-interval: must be in (0, 1h0m0s] with --data-dir"},
		{[]string{"--data-sync-interval", "-1s"}, "", "--data-sync-interval: must be in"},
		{[]string{"--data-sync-interval", "61m"}, "", "--data-sync-interval: must be in"},
		{[]string{"--data-sync-interval", "soon"}, "", `invalid value "soon" for flag -data-sync-interval`},
		{[]string{"--data-sync-interval", "5"}, "", "flag -data-sync-interval"},
		{[]string{"--data-sync-interval="}, "", "flag -data-sync-interval"},
		{nil, "0s", "--data-sync-interval: must be in"},
		{nil, "often", `SLUICE_DATA_SYNC_INTERVAL="often"`},
	} {
		t.Run(strings.Join(tc.args, " ")+tc.env, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("SLUICE_DATA_SYNC_INTERVAL", tc.env)
			}
			args := append([]string{"--data-dir", t.TempDir()}, tc.args...)
			err := runServe(context.Background(), serveArgs(args...)[1:], io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("serve %v, env %q: %v, want an error with %q", tc.args, tc.env, err, tc.want)
			}
		})
	}
}
