package controlapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/rxc-project/rxc/core/analytics"
	"github.com/rxc-project/rxc/core/operators"
	"github.com/rxc-project/rxc/sdk/problem"
)

// chatStatus answers GET /api/analytics/chat/status from the analytics
// service (configuration, provider reachability, capabilities); without
// one the chat is off.
func (a *API) chatStatus(w http.ResponseWriter, r *http.Request, _ operators.Principal) {
	var s analytics.Status
	if a.analytics != nil {
		s = a.analytics.ChatStatus(r.Context())
	}
	problem.WriteJSON(w, http.StatusOK, chatStatusJSON{
		Enabled: s.Enabled, Model: s.Model,
		Capabilities: chatCapabilityJSON{ThreatIntel: s.ThreatIntel, HistoricalEnrichment: s.HistoricalEnrichment, Playbooks: s.Playbooks},
	})
}

type chatRequest struct {
	TenantID string          `json:"tenantId"`
	Question string          `json:"question"`
	Snapshot json.RawMessage `json:"snapshot"`
}

type snapshotJSON struct {
	From            time.Time       `json:"from"`
	To              time.Time       `json:"to"`
	SensorID        string          `json:"sensorId"`
	TopSources      []addressJSON   `json:"topSources"`
	TopDestinations []addressJSON   `json:"topDestinations"`
	TopSignatures   []signatureJSON `json:"topSignatures"`
	CVEs            []cveJSON       `json:"cves"`
	Text            string          `json:"text"`
}

func (s snapshotJSON) core() analytics.Snapshot {
	out := analytics.Snapshot{From: s.From, To: s.To, SensorID: s.SensorID, Text: s.Text}
	for _, x := range s.TopSources {
		out.TopSources = append(out.TopSources, analytics.AddressCount{IP: x.IP, Count: x.Count})
	}
	for _, x := range s.TopDestinations {
		out.TopDestinations = append(out.TopDestinations, analytics.AddressCount{IP: x.IP, Count: x.Count})
	}
	for _, x := range s.TopSignatures {
		out.TopSignatures = append(out.TopSignatures, analytics.SignatureCount(x))
	}
	for _, x := range s.CVEs {
		out.CVEs = append(out.CVEs, analytics.CVECount{ID: x.ID, Count: x.Count, LastSeen: x.LastSeen})
	}
	return out
}

// askChat answers POST /api/analytics/chat with a text/event-stream of
// `enrichment`, `delta`, then `done` or `error` events. Everything that
// can be refused is refused as a problem before the stream starts; once
// it has started, failures arrive as an `error` event. The request's
// context ends when the operator disconnects, which cancels the lookups
// and the model call.
func (a *API) askChat(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	if ok, wait := a.chatLimiter.allow(p.Operator.ID); !ok {
		secs := int((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
		problem.Write(w, r, problem.For(problem.CodeRateLimited,
			"too many chat questions from this operator; retry after the time in Retry-After").WithTitle("Too many questions"))
		return
	}
	if a.analytics == nil {
		a.fail(w, r, analytics.ErrChatDisabled)
		return
	}
	var req chatRequest
	if !decodeBody(w, r, MaxBodyBytes, &req) {
		return
	}
	snap, bad := decodeSnapshot(req.Snapshot)
	if bad != nil {
		problem.Write(w, r, bad)
		return
	}
	creq := analytics.ChatRequest{TenantID: req.TenantID, Question: req.Question, Snapshot: snap}
	if err := a.analytics.ValidateChat(r.Context(), creq); err != nil {
		a.fail(w, r, err)
		return
	}
	if !a.tenantVisible(w, r, p, operators.PermView, req.TenantID) {
		return
	}

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	// The server's write timeout is shorter than a model's answer may take;
	// the service's own timeouts bound this request instead.
	_ = rc.SetWriteDeadline(time.Time{})
	s := &sseWriter{w: w, rc: rc}
	_ = rc.Flush()

	model, err := a.analytics.Chat(r.Context(), creq, s)
	switch {
	case r.Context().Err() != nil:
		a.log.Debug("chat client went away", "operator", p.Operator.ID)
	case err != nil:
		pb := a.problemFor(w, r, err)
		_ = s.send("error", chatErrorJSON{Code: string(pb.Code), Message: pb.Detail})
	default:
		_ = s.send("done", chatDoneJSON{Model: model})
	}
}

// decodeSnapshot checks the snapshot's size and shape; an absent or null
// snapshot is an empty one.
func decodeSnapshot(raw json.RawMessage) (analytics.Snapshot, *problem.Problem) {
	if len(raw) > analytics.MaxSnapshotBytes {
		return analytics.Snapshot{}, problem.For(problem.CodeSnapshotTooLarge, fmt.Sprintf("the snapshot must not exceed %d bytes of JSON", analytics.MaxSnapshotBytes))
	}
	var snap snapshotJSON
	if len(raw) > 0 && string(raw) != "null" {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&snap); err != nil {
			return analytics.Snapshot{}, problem.InvalidJSON("snapshot: " + snapshotError(err))
		}
	}
	return snap.core(), nil
}

type chatErrorJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type chatDoneJSON struct {
	Model string `json:"model"`
}

type enrichmentJSON struct {
	Kind      string `json:"kind"`
	Indicator string `json:"indicator"`
	Title     string `json:"title"`
	Detail    string `json:"detail"`
}

type deltaJSON struct {
	Text string `json:"text"`
}

// sseWriter writes server-sent events and flushes each one.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (s *sseWriter) send(event string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, b); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *sseWriter) Enrichment(e analytics.Enrichment) error {
	return s.send("enrichment", enrichmentJSON{Kind: e.Kind, Indicator: e.Indicator, Title: e.Title, Detail: e.Detail})
}

func (s *sseWriter) Delta(text string) error { return s.send("delta", deltaJSON{Text: text}) }

func snapshotError(err error) string {
	var typeErr *json.UnmarshalTypeError
	var timeErr *time.ParseError
	switch {
	case errors.As(err, &typeErr):
		return fmt.Sprintf("field %q must be of type %s", typeErr.Field, typeErr.Type)
	case errors.As(err, &timeErr):
		return "from and to must be RFC 3339 times"
	default:
		return err.Error()
	}
}
