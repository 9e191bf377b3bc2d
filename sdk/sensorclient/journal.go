package sensorclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// RenewalFile journals a renewal in flight (a secret: mode 0600).
const RenewalFile = "renewal.json"

// EnrolmentFile keeps the key and CSR of an enrolment in flight (a secret:
// mode 0600), next to the redemption: every attempt, and the first after a
// restart, sends the same CSR, so the control plane can answer again a
// request whose answer was lost. StateDir.ClearRedemption removes it.
const EnrolmentFile = "enrolment.json"

// pendingEnrolment is an enrolment in flight: the key and CSR made for it
// and for which sensor.
type pendingEnrolment struct {
	SensorID string `json:"sensorId"`
	KeyPEM   string `json:"key"`
	CSR      string `json:"csr"`
}

func newPendingEnrolment(sensorID string) (*pendingEnrolment, error) {
	_, keyPEM, csr, err := newKeyAndCSR(sensorID)
	if err != nil {
		return nil, err
	}
	return &pendingEnrolment{SensorID: sensorID, KeyPEM: string(keyPEM), CSR: csr}, nil
}

// pendingEnrolmentFor returns the enrolment of sensorID kept in d, or
// makes and keeps a new one (before anything is sent).
func (d *StateDir) pendingEnrolmentFor(sensorID string) (*pendingEnrolment, error) {
	data, err := d.readSecret(EnrolmentFile)
	switch {
	case err == nil:
		var p pendingEnrolment
		if err := json.Unmarshal(data, &p); err != nil {
			return nil, fmt.Errorf("%s: %w", EnrolmentFile, err)
		}
		if p.SensorID == sensorID {
			return &p, nil
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	p, err := newPendingEnrolment(sensorID)
	if err != nil {
		return nil, err
	}
	data, err = json.Marshal(p)
	if err != nil {
		return nil, err
	}
	if err := writeAtomic(d.file(EnrolmentFile), data); err != nil {
		return nil, err
	}
	return p, nil
}

func (d *StateDir) clearEnrolment() error {
	if err := os.Remove(d.file(EnrolmentFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// pendingRenewal is a renewal in flight: the key and CSR made for it, for
// which sensor and replacing which certificate, and the answer once it has
// arrived.
type pendingRenewal struct {
	SensorID  string             `json:"sensorId"`
	ForSerial string             `json:"forSerial"`
	KeyPEM    string             `json:"key"`
	CSR       string             `json:"csr"`
	Answer    *certificateAnswer `json:"answer,omitempty"`
}

func newPendingRenewal(st *State) (*pendingRenewal, error) {
	_, keyPEM, csr, err := newKeyAndCSR(st.SensorID)
	if err != nil {
		return nil, err
	}
	return &pendingRenewal{SensorID: st.SensorID, ForSerial: st.Serial, KeyPEM: string(keyPEM), CSR: csr}, nil
}

func (d *StateDir) loadRenewal() (*pendingRenewal, error) {
	data, err := d.readSecret(RenewalFile)
	if err != nil {
		return nil, err
	}
	var p pendingRenewal
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", RenewalFile, err)
	}
	return &p, nil
}

func (d *StateDir) saveRenewal(p *pendingRenewal) error {
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return writeAtomic(d.file(RenewalFile), data)
}

// ClearRenewal removes the renewal journal: call it once the renewed state
// is saved.
func (d *StateDir) ClearRenewal() error {
	if err := os.Remove(d.file(RenewalFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// completeRenewal finishes a renewal whose answer is journaled but whose
// Save may have been interrupted (the key written, the certificate or
// sensor.json not yet): it applies the answer to st, saves it and clears the
// journal. A journal without an answer, or for another sensor or
// certificate, leaves st as it is (RenewIn decides about it).
func (d *StateDir) completeRenewal(st *State) (*State, error) {
	p, err := d.loadRenewal()
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	if p.Answer == nil || p.SensorID != st.SensorID {
		return st, nil
	}
	next, err := st.renewed(p, *p.Answer)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", RenewalFile, err)
	}
	if st.Serial != p.ForSerial && st.Serial != next.Serial {
		// A journal older than the certificate on disk: stale.
		return st, d.ClearRenewal()
	}
	if err := d.Save(next); err != nil {
		return nil, err
	}
	return next, d.ClearRenewal()
}

// ResultsFile keeps the sensor's result outbox (see Outbox), so an agent
// restarted before the control plane recorded its results still reports
// them, and does not apply a redelivered command again. SaveResults and
// LoadResults read and write the plain list agents before the outbox kept.
const ResultsFile = "results.json"

// SaveResults replaces the kept command results.
func (d *StateDir) SaveResults(results []CommandResult) error {
	data, err := json.Marshal(results)
	if err != nil {
		return err
	}
	return writeAtomic(d.file(ResultsFile), data)
}

// LoadResults returns the kept command results, none when there are none.
func (d *StateDir) LoadResults() ([]CommandResult, error) {
	data, err := d.readSecret(ResultsFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var results []CommandResult
	if err := json.Unmarshal(data, &results); err != nil {
		return nil, fmt.Errorf("%s: %w", ResultsFile, err)
	}
	if len(results) > MaxResults {
		results = results[len(results)-MaxResults:]
	}
	return results, nil
}
