package fleet

import "time"

// The fleet's seams besides the status side (statusservice.go) and
// revocation (revocation.go): enrolment and commands, each a service with
// only its ports. New builds them from Config; Service embeds them.

// EnrolmentPorts is what enrolment and renewal read and write.
type EnrolmentPorts interface {
	EnrollStore
	SensorReader
}

// Enrolment issues sensors their certificates, tokens and NATS
// credentials: first enrolment and renewal.
type Enrolment struct {
	store        EnrolmentPorts
	ca           CertificateAuthority
	provisioner  Provisioner
	provisioning bool
	certTTL      time.Duration
	minRenew     time.Duration
	clocked
}

// CommandPorts is what commands and batches read and write.
type CommandPorts interface {
	SensorReader
	CommandStore
	BatchStore
	BatchLister
}

// Commands records start and stop commands, to one sensor or in batches,
// publishes them and settles what the stream answered.
type Commands struct {
	store      CommandPorts
	publisher  CommandPublisher
	commandTTL time.Duration
	maxSkew    time.Duration
	// batchConcurrency bounds PublishQueued; wake signals it.
	batchConcurrency int
	wake             chan struct{}
	clocked
}

// TenantPorts is what tenants and their NATS provisioning read and write.
type TenantPorts interface {
	TenantStore
	TenantProvisioningStore
}

// Tenants creates, reads and deletes tenants and gives them their NATS
// accounts.
type Tenants struct {
	store        TenantPorts
	provisioner  Provisioner
	provisioning bool
	locker       Locker
	clocked
}

// ClaimPorts is what claim codes read and write.
type ClaimPorts interface {
	TenantReader
	ClaimStore
	RedeemStore
}

// Claims issues, lists, revokes and redeems one-time claim codes.
type Claims struct {
	store         ClaimPorts
	enrollmentTTL time.Duration
	clocked
}

// RegistryPorts is what the sensor registry reads and writes.
type RegistryPorts interface {
	SensorStore
	SensorLister
	LifecycleStore
}
