package app_test

import (
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
)

// With SENSOR_USER_JWT_TTL, POST /users hands out a sensor user JWT
// expiring that long from now; asked again at once (a retry) it hands out
// the same one, and the user keeps its key.
func TestSensorUserJWTExpiry(t *testing.T) {
	s := provisionertest.Start(t, provisionertest.Options{})
	s.StopServe()
	s.Config.SensorUserJWTTTL = time.Hour
	s.StartServe()
	s.WaitNATSReady()
	account(t, s, "acme")
	before := time.Now()
	u := sensorUser(t, s, "acme", "s1")
	uc, err := jwt.DecodeUserClaims(u.UserJWT)
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Unix(uc.Expires, 0)
	if uc.Expires == 0 || exp.Before(before.Add(time.Hour-2*time.Second)) || exp.After(time.Now().Add(time.Hour+time.Second)) {
		t.Fatalf("user JWT expires at %v, want an hour from now", exp)
	}
	again := sensorUser(t, s, "acme", "s1")
	if again.UserJWT != u.UserJWT || again.UserPubKey != u.UserPubKey {
		t.Fatal("a repeated request within a minute got other credentials")
	}
	sensorConnects(t, s, again, "sensor with an expiring JWT")
}
