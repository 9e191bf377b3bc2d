// Package sensorpb holds the gRPC contract between sensors and the control
// plane: health checks and the event stream. It is its own module so that a
// third-party sensor agent can import it without the servers' dependencies.
// A sensor's tenant and id are never message fields: the server takes them
// from the verified client certificate.
package sensorpb
