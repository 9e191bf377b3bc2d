// Package migrations holds the SQL schema files, applied in order by the
// binaries' migrate subcommands (adapters/postgres/migrate) and usable as
// plain SQL with psql. Files are named NNN_name.sql; each component has its
// own set and its own version sequence.
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed *.sql
var provisioner embed.FS

// Provisioner is the provisioner's schema: the *.sql files at the root of
// this folder (not those of sub-folders).
var Provisioner fs.FS = provisioner
