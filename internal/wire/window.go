package wire

// FlowWindow is the HTTP/2 flow-control window (per stream and per
// connection) of every Sluice gRPC server and client: the public API, the
// peer transport and the Go client. A fixed window turns off gRPC's BDP
// estimation, whose PING per burst of data costs a write and a read on each
// side: on a stream of small check messages, as many syscalls as the checks
// themselves. 1 MiB is ample for check messages.
const FlowWindow = 1 << 20
