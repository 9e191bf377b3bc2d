package controlplanetest

import "time"

// SensorView is what the apps' tests read of a sensor from the operator
// API (GET /api/sensors/{id} and the items of GET /api/sensors): a client's
// view of the answer, of which controlapi's own tests pin every field.
type SensorView struct {
	ID          string `json:"id"`
	TenantID    string `json:"tenantId"`
	State       string `json:"state"`
	Certificate *struct {
		Serial string `json:"serial"`
	} `json:"certificate"`
	LastCommand *struct {
		CommandID      string     `json:"commandId"`
		Action         string     `json:"action"`
		AcknowledgedAt *time.Time `json:"acknowledgedAt"`
	} `json:"lastCommand"`
}
