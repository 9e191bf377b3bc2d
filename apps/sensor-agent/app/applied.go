package app

import (
	"sync"
	"time"

	"github.com/rxc-project/rxc/sdk/logkey"
	"github.com/rxc-project/rxc/sdk/sensorclient"
)

// appliedSet is what the agent applied, kept on disk
// (sensorclient.AppliedFile) until each command expires: a command
// delivered again (a recreated consumer delivers every command the stream
// keeps for the sensor) is recognised however many other commands came
// since.
type appliedSet struct {
	mu   sync.Mutex
	list []sensorclient.Applied // oldest first
}

// loadApplied reads the applied commands kept before a restart.
func (a *Agent) loadApplied() {
	list, err := a.dir.LoadApplied()
	if err != nil {
		a.log.Warn("applied commands kept before the restart are unreadable; starting without them", logkey.Error, err)
	}
	a.applied.mu.Lock()
	a.applied.list = list
	a.applied.mu.Unlock()
}

// wasApplied reports whether the command was applied and has not expired.
func (a *Agent) wasApplied(id string) bool {
	a.applied.mu.Lock()
	defer a.applied.mu.Unlock()
	for _, e := range a.applied.list {
		if e.CommandID == id {
			return true
		}
	}
	return false
}

// markApplied remembers the command until it expires, on disk too, dropping
// expired entries and the oldest beyond sensorclient.MaxApplied.
func (a *Agent) markApplied(c sensorclient.Command) {
	a.applied.mu.Lock()
	defer a.applied.mu.Unlock()
	now := time.Now()
	kept := a.applied.list[:0:0]
	for _, e := range a.applied.list {
		if now.Before(e.Until) && e.CommandID != c.CommandID {
			kept = append(kept, e)
		}
	}
	kept = append(kept, sensorclient.Applied{CommandID: c.CommandID, Until: c.ExpiresAt.UTC()})
	if len(kept) > sensorclient.MaxApplied {
		kept = kept[len(kept)-sensorclient.MaxApplied:]
	}
	a.applied.list = kept
	if err := a.dir.SaveApplied(kept); err != nil {
		a.log.Warn("save applied commands", logkey.Error, err)
	}
}
