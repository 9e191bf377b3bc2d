package fleet

// ResultsConfirmation is the control plane's answer to a status report that
// asked for one (over NATS: a report published with a reply subject, the
// answer encoded as sdk/sensorwire's Confirmation by sensorbus): the
// command ids of the report's results that are now settled in the store —
// recorded by this report, recorded earlier (the first report of a command
// wins), or naming no command of this sensor, which will never be recorded.
// It is sent only after the transaction that recorded them committed, so an
// agent may forget what it confirms. TenantID and SensorID name the sensor
// whose report it answers, from the subject the report arrived on: an agent
// ignores a confirmation naming another sensor (a sensor cannot confirm
// another's results by pointing its reply subject at the other's inbox).
type ResultsConfirmation struct {
	TenantID string
	SensorID string
	Recorded []string
}

// confirmRecorded calls the confirmations of the updates whose results a
// committed batch settled: recorded[i] are update i's, nil when it
// settled none or asked for no confirmation.
func confirmRecorded(msgs []StatusUpdate, recorded [][]string) {
	for i, m := range msgs {
		if m.Confirm == nil || recorded[i] == nil {
			continue
		}
		m.Confirm(ResultsConfirmation{TenantID: m.Sensor.TenantID, SensorID: m.Sensor.SensorID, Recorded: recorded[i]})
	}
}

// resultIDs are the command ids of results, each once.
func resultIDs(results []CommandResult) []string {
	ids := make([]string, 0, len(results))
	seen := make(map[string]bool, len(results))
	for _, r := range results {
		if !seen[r.CommandID] {
			seen[r.CommandID] = true
			ids = append(ids, r.CommandID)
		}
	}
	return ids
}
