// Package logkey names the attributes RXC's structured logs share, so one
// thing carries one key in every service and a log query finds it
// everywhere: an error is always "error", a tenant "tenant_id", a sensor
// "sensor_id". internal/archtest refuses the spellings these replace as
// literal keys in slog calls.
package logkey

const (
	// Error is the error that made the event worth logging.
	Error = "error"
	// Tenant is a tenant id.
	Tenant = "tenant_id"
	// Sensor is a sensor id.
	Sensor = "sensor_id"
	// Command is a command id.
	Command = "command_id"
)
