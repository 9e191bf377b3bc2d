package grpcmtls

// SetTransportTuned switches the per-connection settings (read buffer,
// flow-control windows, streams a connection) between this package's and
// grpc-go's defaults, for BenchmarkStreamEvents.
func SetTransportTuned(on bool) { transportTuned = on }
