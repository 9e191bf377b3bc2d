// Package buildinfo carries the version stamped into binaries at link time.
package buildinfo

// Version is set with -ldflags "-X .../buildinfo.Version=…"; "dev" otherwise.
var Version = "dev"
