package main

import (
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// defaultAddr is the node address of check, usage and members without
// --addr or SLUICE_ADDR.
const defaultAddr = "127.0.0.1:8081"

// unreachable explains an Unavailable error of a call to the nodes at
// addrs (a refused connection, say): which address(es) it tried, and that
// --addr or SLUICE_ADDR changes them. Other errors are returned as they are.
func unreachable(addrs []string, err error) error {
	if err == nil || status.Code(err) != codes.Unavailable {
		return err
	}
	where := strings.Join(addrs, ",")
	if len(addrs) == 0 {
		where = defaultAddr + ", the default"
	}
	return fmt.Errorf("no answer from Sluice at %s (change it with --addr or SLUICE_ADDR): %w", where, err)
}
