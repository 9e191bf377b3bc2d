package app_test

import (
	"testing"

	"github.com/rxc-project/rxc/apps/controlplane/app"
)

// TestRetentionConfigOverflowRefused (attack): the range check multiplied
// the days into a time.Duration before comparing, so a number of days
// past 106,751 wrapped around int64: 2^48+1 days read as exactly 1 day (a
// whole number of days in range) and started, pruning a day-old history
// where the operator asked for "practically forever". Every value past
// 36,500 must stop the start, naming the variable.
func TestRetentionConfigOverflowRefused(t *testing.T) {
	const wrapsToOneDay = 1<<48 + 1 // (2^48+1)·86,400·10^9 ≡ 86,400·10^9 (mod 2^64)
	refusedAtStart(t, map[string]func(*app.ServeConfig){
		"COMMAND_HISTORY_RETENTION_DAYS=281474976710657": func(c *app.ServeConfig) { c.CommandHistoryRetentionDays = wrapsToOneDay },
		"AUDIT_RETENTION_DAYS=106752":                    func(c *app.ServeConfig) { c.AuditRetentionDays = 106752 },
	})
}
