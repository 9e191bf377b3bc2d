package sensorclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// AppliedFile keeps the ids of the commands the sensor applied, each until
// the command expires, so that a command delivered again is never applied
// twice: after a restart, and after the provisioner recreated the sensor's
// consumer on a live NATS node (a node loss with consumers of one replica),
// when the new consumer delivers again every command the stream keeps for
// the sensor. It is separate from the results file, which holds only the
// latest MaxResults outcomes for the status reports.
const AppliedFile = "applied.json"

// MaxApplied bounds the ids kept, newest kept. The command stream keeps at
// most COMMAND_STREAM_MAX_PER_SENSOR commands per sensor (default 64), which
// is what a recreated consumer can deliver again, so that setting must stay
// at or below this one.
const MaxApplied = 256

// Applied is a command the sensor applied, remembered until it expires (an
// expired command is refused anyway).
type Applied struct {
	CommandID string    `json:"commandId"`
	Until     time.Time `json:"until"`
}

// SaveApplied replaces the kept applied commands.
func (d *StateDir) SaveApplied(applied []Applied) error {
	data, err := json.Marshal(applied)
	if err != nil {
		return err
	}
	return writeAtomic(d.file(AppliedFile), data)
}

// LoadApplied returns the kept applied commands, none when there are none.
func (d *StateDir) LoadApplied() ([]Applied, error) {
	data, err := d.readSecret(AppliedFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var applied []Applied
	if err := json.Unmarshal(data, &applied); err != nil {
		return nil, fmt.Errorf("%s: %w", AppliedFile, err)
	}
	if len(applied) > MaxApplied {
		applied = applied[len(applied)-MaxApplied:]
	}
	return applied, nil
}
