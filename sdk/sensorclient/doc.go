// Package sensorclient is the sensor side of RXC, for the reference agent
// and for third-party agents alike: an Enroller that redeems a claim code
// and enrols (or renews) with a fresh ECDSA P-256 key and CSR over the
// control plane's HTTP API; a State kept in a private directory with atomic
// writes; a Commands loop that pulls the sensor's own commands from
// JetStream through the tenant's imported API and publishes status on core
// NATS; and a GRPC client for health checks and the event stream over
// mutual TLS 1.3 whose certificate can be swapped after a renewal. Every
// network call has a timeout, and the long-running loops reconnect with
// exponential backoff and jitter. Nothing here logs tokens, keys, creds or
// claim codes.
package sensorclient
