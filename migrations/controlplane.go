package migrations

import (
	"embed"
	"io/fs"
)

//go:embed controlplane/*.sql
var controlPlaneSQL embed.FS

// ControlPlane holds the control plane's schema files (001_init.sql, …),
// applied in lexical order.
var ControlPlane fs.FS = mustSub(controlPlaneSQL, "controlplane")

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err) // the directory is embedded at build time
	}
	return sub
}
