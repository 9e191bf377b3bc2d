// Package provisionerwire declares, once, the JSON bodies of the
// provisioner's write API: the server (provisionerapi) writes them and the
// control plane's client (provisionerclient) reads them, so the two cannot
// drift. docs/provisioner.md ("HTTP API") describes the routes.
package provisionerwire

import "time"

// AccountRequest is POST /accounts.
type AccountRequest struct {
	TenantID string `json:"tenantId"`
	Name     string `json:"name"`
}

// AccountResponse answers POST /accounts (201 new, 200 existing).
type AccountResponse struct {
	TenantID      string `json:"tenantId"`
	Name          string `json:"name"`
	AccountPubKey string `json:"accountPubKey"`
	AccountJWT    string `json:"accountJWT"`
}

// UserRequest is POST /users.
type UserRequest struct {
	TenantID string `json:"tenantId"`
	SensorID string `json:"sensorId"`
}

// UserResponse answers POST /users: the sensor's user, its .creds and the
// subjects it uses.
type UserResponse struct {
	TenantID       string `json:"tenantId"`
	SensorID       string `json:"sensorId"`
	AccountID      string `json:"accountId"`
	UserPubKey     string `json:"userPubKey"`
	UserJWT        string `json:"userJWT"`
	Creds          string `json:"creds"`
	Stream         string `json:"stream"`
	Consumer       string `json:"consumer"`
	JSAPIPrefix    string `json:"jsApiPrefix"`
	InboxPrefix    string `json:"inboxPrefix"`
	CommandSubject string `json:"commandSubject"`
	StatusSubject  string `json:"statusSubject"`
}

// BackendUserRequest is POST /backend-user; an empty name is the
// provisioner's default.
type BackendUserRequest struct {
	Name string `json:"name,omitempty"`
}

// BackendUserResponse answers POST /backend-user.
type BackendUserResponse struct {
	Name       string `json:"name"`
	AccountID  string `json:"accountId"`
	UserPubKey string `json:"userPubKey"`
	UserJWT    string `json:"userJWT"`
	Creds      string `json:"creds"`
}

// RevokeRequest is POST /revoke.
type RevokeRequest struct {
	AccountID  string `json:"accountId"`
	UserPubKey string `json:"userPubKey"`
}

// RevokeResponse answers POST /revoke.
type RevokeResponse struct {
	AccountID  string    `json:"accountId"`
	UserPubKey string    `json:"userPubKey"`
	RevokedAt  time.Time `json:"revokedAt"`
	AccountJWT string    `json:"accountJWT"`
}
