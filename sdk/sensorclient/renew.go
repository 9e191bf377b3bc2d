package sensorclient

import (
	"math/rand/v2"
	"time"
)

// RenewAt is when to renew a certificate that arrived at obtained and
// expires at notAfter: two thirds into that span, brought forward at random
// by up to a tenth of it so sensors enrolled together do not renew
// together. The span starts at obtained rather than NotBefore because the
// CA backdates NotBefore.
func RenewAt(obtained, notAfter time.Time) time.Time {
	return renewAt(obtained, notAfter, rand.Float64())
}

// renewAt is RenewAt with the random draw r in [0, 1) given.
func renewAt(obtained, notAfter time.Time, r float64) time.Time {
	span := notAfter.Sub(obtained)
	if span <= 0 {
		return obtained
	}
	return obtained.Add(span*2/3 - time.Duration(r*float64(span/10)))
}

// RenewalDue is the time a State's certificate should be renewed; a state
// without ObtainedAt (written by an older agent) counts from now minus
// nothing, i.e. it is due at two thirds of what remains.
func (s *State) RenewalDue(now time.Time) time.Time {
	obtained := s.ObtainedAt
	if obtained.IsZero() || obtained.After(now) {
		obtained = now
	}
	return RenewAt(obtained, s.NotAfter)
}
