package main

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"time"
)

// redisCommand sends one command to the Redis at addr and returns its
// reply line (simple strings, errors and integers only: enough for
// FLUSHALL and PING).
func redisCommand(addr string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if strings.HasPrefix(line, "-") {
		return "", fmt.Errorf("redis %s: %s", args[0], line[1:])
	}
	return line, nil
}

// flushAll empties the Redis at addr.
func flushAll(addr string) error {
	_, err := redisCommand(addr, "FLUSHALL")
	return err
}
