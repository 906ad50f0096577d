package main

import (
	"flag"
	"io"
	"os"
	"strings"
	"testing"
)

// Size flags take bytes or units, from the command line or their
// SLUICE_ env twin; bad sizes are an error naming the flag or variable.
func TestSizeFlag(t *testing.T) {
	parse := func(args []string, env string) (int64, int, error) {
		var v64 int64 = 7
		v := 7
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Var(int64Size(&v64), "store-max-bytes", "")
		fs.Var(intSizeFlag{&v}, "grpc-max-recv-bytes", "")
		t.Setenv("SLUICE_STORE_MAX_BYTES", env)
		if env == "" {
			os.Unsetenv("SLUICE_STORE_MAX_BYTES")
		}
		err := parseWithEnv(fs, args)
		return v64, v, err
	}
	for _, tc := range []struct {
		args []string
		env  string
		want int64
	}{
		{[]string{"--store-max-bytes", "512MiB"}, "", 512 << 20},
		{[]string{"--store-max-bytes=2GiB"}, "", 2 << 30},
		{[]string{"--store-max-bytes=1GB"}, "", 1_000_000_000},
		{[]string{"--store-max-bytes=1048576"}, "", 1 << 20},
		{[]string{"--store-max-bytes=0"}, "", 0},
		{nil, "256MiB", 256 << 20},
		{[]string{"--store-max-bytes=1KiB"}, "256MiB", 1024}, // the flag wins
		{nil, "", 7},
	} {
		got, _, err := parse(tc.args, tc.env)
		if err != nil || got != tc.want {
			t.Errorf("%v env %q: %d, %v; want %d", tc.args, tc.env, got, err, tc.want)
		}
	}
	if _, got, err := parse([]string{"--grpc-max-recv-bytes=8MiB"}, ""); err != nil || got != 8<<20 {
		t.Errorf("--grpc-max-recv-bytes=8MiB: %d, %v", got, err)
	}
	for _, tc := range []struct {
		args []string
		env  string
		name string
	}{
		{[]string{"--store-max-bytes=lots"}, "", "store-max-bytes"},
		{[]string{"--store-max-bytes=-1"}, "", "store-max-bytes"},
		{nil, "12 parsecs", "SLUICE_STORE_MAX_BYTES"},
		{[]string{"--grpc-max-recv-bytes=4GiB"}, "", "grpc-max-recv-bytes"},
	} {
		if _, _, err := parse(tc.args, tc.env); err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%v env %q: %v, want an error naming %s", tc.args, tc.env, err, tc.name)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 1000: "1000", 1024: "1KiB", 3 << 20: "3MiB", 2 << 30: "2GiB", 1536 << 20: "1536MiB"} {
		if got := formatSize(n); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", n, got, want)
		}
	}
}
