package devstack

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/rxc-project/rxc/sdk/atomicfile"
)

// startSensors creates the demo tenant through the control plane's API,
// waits until its NATS account is provisioned, issues one claim code per
// simulated sensor that has none yet (kept in STATE/sensors/claim-codes.txt)
// and runs the sensor agent on them. The agent keeps its own state in
// STATE/sensors/agent, so a later start resumes the same sensors.
func (s *Stack) startSensors(ctx context.Context, st *state, logs *logs) error {
	api, err := s.tenantAPI(ctx, st, s.cfg.Tenant, "Demo")
	if err != nil {
		return err
	}
	s.say("tenant %q: NATS account provisioned", s.cfg.Tenant)
	if s.cfg.Sensors == 0 {
		return nil
	}
	agent := absPath(s.cfg.SensorAgent)
	if agent == "" || !executable(agent) {
		s.say("sensors: no sensor agent at %q (make build builds bin/sensor-agent): no simulated sensors", s.cfg.SensorAgent)
		return nil
	}
	dir := st.path("sensors")
	if err := ensureDir(dir, 0o700); err != nil {
		return err
	}
	codesFile := st.path("sensors", "claim-codes.txt")
	codes, err := readLines(codesFile)
	if err != nil {
		return err
	}
	for i := len(codes); i < s.cfg.Sensors; i++ {
		code, err := api.issueClaimCode(ctx, s.cfg.Tenant, fmt.Sprintf("demo-sensor-%d", i+1))
		if err != nil {
			return err
		}
		codes = append(codes, code)
	}
	if err := atomicfile.Write(codesFile, []byte(strings.Join(codes, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	out, err := logs.file("sensors")
	if err != nil {
		return err
	}
	// Line i of the file is sensor i's code; a smaller --sensors than last
	// time runs the first ones only.
	n := s.cfg.Sensors
	args := []string{"run", "--api", s.info.APIBaseURL, "--state-dir", st.path("sensors", "agent"),
		"--count", fmt.Sprint(n), "--claim-codes-file", codesFile}
	c, err := startChild(agent, args, out, nil)
	if err != nil {
		return fmt.Errorf("sensor agent: %w", err)
	}
	s.onStop("sensor agent", func(ctx context.Context) error { return c.stop(ctx, syscall.SIGTERM) })
	s.info.Sensors, s.info.SensorAgent = n, agent
	s.say("sensors: %s running %d simulated sensors (log %s)", agent, n, logs.path("sensors"))

	// Ready means the sensors are enrolled; their state follows their status.
	var enrolled []sensorView
	err = waitFor(ctx, 60*time.Second, "the simulated sensors to enrol", func() bool {
		if !c.running() {
			return true
		}
		enrolled, _ = api.enrolledSensors(ctx, s.cfg.Tenant)
		return len(enrolled) >= n
	})
	switch {
	case !c.running():
		return fmt.Errorf("sensor agent exited: %v (see %s)", c.exitErr(), logs.path("sensors"))
	case err != nil:
		s.say("sensors: only %d of %d enrolled so far (see %s)", len(enrolled), n, logs.path("sensors"))
	default:
		s.say("sensors: %d enrolled in tenant %q", len(enrolled), s.cfg.Tenant)
	}
	if s.cfg.StartSensors {
		started, err := api.startNeverCommanded(ctx, enrolled)
		if err != nil {
			return fmt.Errorf("start the simulated sensors: %w", err)
		}
		if started > 0 {
			s.say("sensors: started %d (they stream simulated alerts to Analytics)", started)
		}
	}
	return nil
}

func readLines(p string) ([]string, error) {
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	return lines, sc.Err()
}

// tenantAPI signs the bootstrap operator in to the stack's API and makes
// sure tenant id (named name) exists with its NATS account provisioned.
func (s *Stack) tenantAPI(ctx context.Context, st *state, id, name string) (*apiClient, error) {
	api, err := newAPIClient(s.info.APIBaseURL)
	if err != nil {
		return nil, err
	}
	if err := api.login(ctx, OperatorEmail, st.password); err != nil {
		return nil, err
	}
	if err := api.ensureTenant(ctx, id, name); err != nil {
		return nil, err
	}
	return api, nil
}

// apiClient is the operator side of the control plane's HTTP API, as far as
// the stack needs it.
type apiClient struct {
	base string
	http *http.Client
}

func newAPIClient(base string) (*apiClient, error) {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, err
	}
	return &apiClient{base: base, http: &http.Client{Jar: jar, Timeout: 15 * time.Second}}, nil
}

// do sends body as JSON and decodes a JSON answer into out; want lists the
// accepted statuses.
func (a *apiClient) do(ctx context.Context, method, path string, body, out any, want ...int) (int, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	for _, w := range want {
		if resp.StatusCode != w {
			continue
		}
		if out != nil && len(data) > 0 {
			if err := json.Unmarshal(data, out); err != nil {
				return resp.StatusCode, fmt.Errorf("%s %s: %w", method, path, err)
			}
		}
		return resp.StatusCode, nil
	}
	return resp.StatusCode, fmt.Errorf("%s %s: status %d: %s", method, path, resp.StatusCode, bytes.TrimSpace(data))
}

func (a *apiClient) login(ctx context.Context, email, password string) error {
	_, err := a.do(ctx, http.MethodPost, "/api/auth/login", map[string]string{"email": email, "password": password}, nil, http.StatusNoContent)
	return err
}

type tenantView struct {
	ID                string `json:"id"`
	NATSStatus        string `json:"natsStatus"`
	NATSAccountPubKey string `json:"natsAccountPubKey"`
}

// ensureTenant creates the tenant unless it exists and waits until the
// control plane's reconcile worker has provisioned its NATS account.
func (a *apiClient) ensureTenant(ctx context.Context, id, name string) error {
	var t tenantView
	if _, err := a.do(ctx, http.MethodPost, "/api/tenants", map[string]string{"id": id, "name": name}, &t, http.StatusCreated, http.StatusOK); err != nil {
		return err
	}
	var lastErr error
	err := waitFor(ctx, 60*time.Second, "tenant "+id+" to be provisioned", func() bool {
		_, lastErr = a.do(ctx, http.MethodGet, "/api/tenants/"+url.PathEscape(id), nil, &t, http.StatusOK)
		return lastErr == nil && t.NATSStatus == "provisioned"
	})
	if err != nil && lastErr != nil {
		return fmt.Errorf("%w: %v", err, lastErr)
	}
	return err
}

func (a *apiClient) issueClaimCode(ctx context.Context, tenant, sensorName string) (string, error) {
	var c struct {
		Code string `json:"code"`
	}
	body := map[string]any{"ttlSeconds": 7 * 24 * 3600, "sensorName": sensorName}
	if _, err := a.do(ctx, http.MethodPost, "/api/tenants/"+url.PathEscape(tenant)+"/claim-codes", body, &c, http.StatusCreated); err != nil {
		return "", err
	}
	if c.Code == "" {
		return "", errors.New("claim code answer without a code")
	}
	return c.Code, nil
}

// sensorView is what the stack reads of a sensor.
type sensorView struct {
	ID          string `json:"id"`
	State       string `json:"state"`
	LastCommand *struct {
		Action string `json:"action"`
	} `json:"lastCommand"`
}

// enrolledSensors lists the tenant's sensors past enrolment (not pending).
func (a *apiClient) enrolledSensors(ctx context.Context, tenant string) ([]sensorView, error) {
	var list struct {
		Items []sensorView `json:"items"`
	}
	_, err := a.do(ctx, http.MethodGet, "/api/sensors?limit=500&tenantId="+url.QueryEscape(tenant), nil, &list, http.StatusOK)
	var out []sensorView
	for _, s := range list.Items {
		if s.State != "pending" {
			out = append(out, s)
		}
	}
	return out, err
}

// startNeverCommanded sends start to every sensor no operator has sent a
// command yet, so that a fresh demo streams events at once while a sensor
// an operator stopped stays stopped on the next run (the agent itself
// resumes what it was last told).
func (a *apiClient) startNeverCommanded(ctx context.Context, sensors []sensorView) (int, error) {
	started := 0
	for _, s := range sensors {
		if s.LastCommand != nil || s.State == "revoked" {
			continue
		}
		if _, err := a.do(ctx, http.MethodPost, "/api/sensors/"+url.PathEscape(s.ID)+"/commands", map[string]string{"action": "start"}, nil, http.StatusAccepted); err != nil {
			return started, err
		}
		started++
	}
	return started, nil
}
