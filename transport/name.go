package transport

import sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"

// PeerServiceName is the full gRPC name of the peer service,
// "sluice.v1.Peer": what peer-only interceptors guard.
var PeerServiceName = sluicev1.Peer_ServiceDesc.ServiceName
