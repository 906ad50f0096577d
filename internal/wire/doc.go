// Package wire owns what the public API (api), the peer transport
// (transport) and the Go client share about talking to another process:
// the pending call of a caller that waits for an answer from the network
// (Call, with its Pool), the queue from which a sender takes a batch of
// calls (Queue), and the table of what awaits an answer on a stream, by
// message id (Inflight).
//
// The engines that use them keep their own policies (when to send, how
// many batches may be in flight, what a batch becomes on the wire); this
// package holds only the bookkeeping every one of them needs: a call is
// answered exactly once, by whoever claims it, and a caller whose context
// ends abandons its call and returns at once.
package wire
