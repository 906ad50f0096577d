// Package wire owns what the public API (api), the peer transport
// (transport) and the Go client share about talking to another process:
//
//   - the gRPC codec of every server and client (Codec: vtprotobuf's
//     reflection-free methods, installed per server and per client with
//     ServerOption and DialOption, never registered globally) and the
//     fixed HTTP/2 flow-control window (FlowWindow);
//   - the client side of a stream of batches: the pending call of a caller
//     that waits for an answer from the network (Call, with its Pool and
//     Wait), the queue from which a sender takes a batch of calls (Queue),
//     and the table of what awaits an answer on a stream, by message id
//     (Inflight);
//   - the server side of a stream of batches (ServeBatches);
//   - conversions both APIs make: field-naming InvalidArgument statuses
//     (InvalidArgument, FieldError), the code of a per-item error
//     (ItemCode), and the algorithm enum (ToProtoAlgorithm,
//     FromProtoAlgorithm).
//
// The stream engines that use the calls keep their own policies (when to
// send, how many batches may be in flight, what a batch becomes on the
// wire); this package holds only the bookkeeping every one of them needs:
// a call is answered exactly once, by whoever claims it, and a caller whose
// context ends abandons its call and returns at once. It imports nothing of
// Sluice's above bucket and store.
package wire
