package provisioning_test

import (
	"testing"

	"github.com/rxc-project/rxc/core/provisioning"
)

// CheckUser lets through only users a store can hold: a key and an
// account, and a tenant and sensor id or a name by kind.
func TestCheckUser(t *testing.T) {
	t.Parallel()
	sensor := provisioning.User{PubKey: "UKEY", AccountPubKey: "AKEY", Kind: provisioning.UserSensor, TenantID: "acme", SensorID: "s1"}
	backend := provisioning.User{PubKey: "UKEY", AccountPubKey: "AKEY", Kind: provisioning.UserBackend, Name: "backend"}
	with := func(u provisioning.User, change func(*provisioning.User)) provisioning.User {
		change(&u)
		return u
	}
	for _, c := range []struct {
		name string
		user provisioning.User
		want string // "" when the user passes
	}{
		{"Sensor", sensor, ""},
		{"Backend", backend, ""},
		{"NoPubKey", with(sensor, func(u *provisioning.User) { u.PubKey = "" }), "a user needs a public key and an account"},
		{"NoAccount", with(backend, func(u *provisioning.User) { u.AccountPubKey = "" }), "a user needs a public key and an account"},
		{"SensorWithoutTenant", with(sensor, func(u *provisioning.User) { u.TenantID = "" }), "a sensor user needs a tenant id and a sensor id"},
		{"SensorWithoutSensor", with(sensor, func(u *provisioning.User) { u.SensorID = "" }), "a sensor user needs a tenant id and a sensor id"},
		{"BackendWithoutName", with(backend, func(u *provisioning.User) { u.Name = "" }), "a backend user needs a name"},
		{"NoKind", with(backend, func(u *provisioning.User) { u.Kind = "" }), `unknown user kind ""`},
		{"UnknownKind", with(sensor, func(u *provisioning.User) { u.Kind = "admin" }), `unknown user kind "admin"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := provisioning.CheckUser(c.user)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("CheckUser = %v, want nil", err)
			case c.want != "" && (err == nil || err.Error() != c.want):
				t.Errorf("CheckUser = %v, want %q", err, c.want)
			}
		})
	}
}
