package controlapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"

	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/operators"
	"github.com/rxc-project/rxc/sdk/problem"
)

// MergePatchType is the media type of an RFC 7396 JSON merge patch.
const MergePatchType = "application/merge-patch+json"

// labelSelectors reads the repeatable label=key=value parameters of a
// listing: every one must match. A key given twice is refused.
func labelSelectors(q url.Values) (map[string]string, error) {
	sel := q["label"]
	if len(sel) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(sel))
	for _, s := range sel {
		k, v, err := fleet.ParseLabelSelector(s)
		if err != nil {
			return nil, err
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%w: key %q: given twice; a sensor has one value per key", fleet.ErrInvalidLabels, k)
		}
		out[k] = v
	}
	return out, fleet.ValidateLabels(out)
}

// includeDecommissioned reads ?include=decommissioned (the only include).
func includeDecommissioned(q url.Values) (bool, error) {
	switch v := q.Get("include"); v {
	case "":
		return false, nil
	case "decommissioned":
		return true, nil
	default:
		return false, fmt.Errorf("%w: include %q (the only one is decommissioned)", fleet.ErrInvalidInput, v)
	}
}

// patchSensor applies an RFC 7396 merge patch of name and labels:
// operators of the sensor's tenant only (viewers 403, other tenants' and
// unknown sensors 404, before the body is read).
func (a *API) patchSensor(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	sensor, ok := a.sensorFor(w, r, p, operators.PermOperate)
	if !ok {
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != MergePatchType && mt != "application/json") {
			problem.Write(w, r, problem.For(problem.CodeUnsupportedMediaType, "send "+MergePatchType+" (or application/json)"))
			return
		}
		r.Header.Set("Content-Type", "application/json")
	}
	var doc map[string]json.RawMessage
	if !decodeBody(w, r, MaxBodyBytes, &doc) {
		return
	}
	patch, err := parseSensorPatch(doc)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	s, err := a.fleet.PatchSensor(r.Context(), sensor.ID, patch)
	reply(a, w, r, http.StatusOK, s, err, sensorOut)
}

// parseSensorPatch reads a merge patch document: an object of name (a
// string) and labels (null, or an object of strings and nulls).
func parseSensorPatch(doc map[string]json.RawMessage) (fleet.SensorPatch, error) {
	var p fleet.SensorPatch
	if doc == nil {
		return p, fmt.Errorf("%w: a merge patch of a sensor is an object", fleet.ErrInvalidInput)
	}
	isNull := func(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }
	for field, raw := range doc {
		switch field {
		case "name":
			var name string
			if isNull(raw) || json.Unmarshal(raw, &name) != nil {
				return p, fmt.Errorf("%w: name must be a string (it cannot be removed)", fleet.ErrInvalidInput)
			}
			p.Name = &name
		case "labels":
			if isNull(raw) {
				p.ClearLabels = true
				continue
			}
			var labels map[string]*string
			if err := json.Unmarshal(raw, &labels); err != nil || labels == nil {
				return p, fmt.Errorf("%w: labels must be an object of strings, or null to remove a key", fleet.ErrInvalidLabels)
			}
			p.Labels = labels
		default:
			return p, fmt.Errorf("%w: %q cannot be changed (only name and labels)", fleet.ErrInvalidInput, field)
		}
	}
	return p, nil
}

// decommissionSensor retires a sensor for good: 204, or 409
// sensor_decommissioned the second time.
func (a *API) decommissionSensor(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	sensor, ok := a.sensorFor(w, r, p, operators.PermOperate)
	if !ok {
		return
	}
	_, err := a.fleet.DecommissionSensor(r.Context(), sensor.ID, p.Actor())
	a.replyNoContent(w, r, err)
}

// deleteTenant deletes a tenant without live sensors: admins only (others
// who see the tenant 403, the rest 404); 409 tenant_has_sensors while a
// sensor is not decommissioned.
func (a *API) deleteTenant(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	id, ok := a.tenantFor(w, r, p, operators.PermView)
	if !ok || !a.allow(w, r, p, operators.PermAdmin, "", nil) {
		return
	}
	a.replyNoContent(w, r, a.fleet.DeleteTenant(r.Context(), id, p.Actor()))
}
