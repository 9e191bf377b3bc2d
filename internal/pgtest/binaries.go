package pgtest

// ServerBinaries returns the folder holding initdb and pg_ctl, found the way
// Start finds them: PG_BIN, then Debian's versioned folders (newest first),
// then PATH. Programs that manage a long-lived cluster of their own (the
// local development stack) use it so both agree on which PostgreSQL runs.
func ServerBinaries() (string, error) { return findBinaries() }
