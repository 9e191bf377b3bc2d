package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	sensorpb "github.com/rxc-project/rxc/proto"
)

// Phase is where a capture engine is in its life.
type Phase string

// Phases of a Runner.
const (
	// PhaseIdle: never started since the agent began.
	PhaseIdle    Phase = "idle"
	PhaseRunning Phase = "running"
	PhaseStopped Phase = "stopped"
	// PhaseFailed: the engine died; Detail says why.
	PhaseFailed Phase = "failed"
)

// RunnerState is a Runner's phase with an explanation for failures.
type RunnerState struct {
	Phase  Phase
	Detail string
}

// Runner is the capture engine the agent drives: a real one would start
// and stop Suricata or Zeek and tail its output. Start and Stop are
// idempotent and bounded by ctx; the engine itself keeps running after
// Start returns. A failure after Start shows as PhaseFailed in State.
type Runner interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
	State() RunnerState
}

// SimulatedConfig configures the simulated capture engine.
type SimulatedConfig struct {
	SensorID string
	// EventsPerMinute is the rate of fake alerts while running (0: none).
	EventsPerMinute int
	// Events receives the alerts; when it is full they are dropped and
	// counted rather than stalling the engine.
	Events chan<- *sensorpb.SensorEvent
	// FailAfter makes the engine die that long after each start (0: never),
	// to exercise failure reporting.
	FailAfter time.Duration
	Logger    *slog.Logger
}

// Simulated pretends to be a capture process: it changes state like one and
// emits plausible IDS alerts while running.
type Simulated struct {
	cfg SimulatedConfig
	log *slog.Logger

	mu     sync.Mutex
	state  RunnerState
	cancel context.CancelFunc
	done   chan struct{}

	seq, dropped atomic.Uint64
}

// NewSimulated checks cfg.
func NewSimulated(cfg SimulatedConfig) (*Simulated, error) {
	if cfg.EventsPerMinute < 0 || cfg.EventsPerMinute > 60000 {
		return nil, fmt.Errorf("events per minute %d: want 0 to 60000", cfg.EventsPerMinute)
	}
	if cfg.EventsPerMinute > 0 && cfg.Events == nil {
		return nil, errors.New("simulated runner: an events channel is required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Simulated{cfg: cfg, log: log, state: RunnerState{Phase: PhaseIdle}}, nil
}

// Start launches the simulated engine.
func (s *Simulated) Start(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state.Phase == PhaseRunning {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan struct{})
	s.state = RunnerState{Phase: PhaseRunning}
	go s.run(ctx, s.done)
	s.log.Info("capture engine started (simulated)", "events_per_minute", s.cfg.EventsPerMinute)
	return nil
}

// Stop ends the simulated engine and waits for it within ctx.
func (s *Simulated) Stop(ctx context.Context) error {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.cancel, s.done = nil, nil
	s.state = RunnerState{Phase: PhaseStopped}
	s.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("stop capture engine: %w", ctx.Err())
	}
	s.log.Info("capture engine stopped (simulated)", "events", s.seq.Load(), "dropped", s.dropped.Load())
	return nil
}

// State returns the engine's state.
func (s *Simulated) State() RunnerState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

func (s *Simulated) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	var tick <-chan time.Time
	if n := s.cfg.EventsPerMinute; n > 0 {
		t := time.NewTicker(time.Minute / time.Duration(n))
		defer t.Stop()
		tick = t.C
	}
	var fail <-chan time.Time
	if s.cfg.FailAfter > 0 {
		t := time.NewTimer(s.cfg.FailAfter)
		defer t.Stop()
		fail = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-fail:
			s.mu.Lock()
			s.state = RunnerState{Phase: PhaseFailed, Detail: "capture process exited unexpectedly (simulated failure)"}
			s.cancel, s.done = nil, nil
			s.mu.Unlock()
			s.log.Error("capture engine failed (simulated)")
			return
		case <-tick:
			select {
			case s.cfg.Events <- s.event():
			default:
				s.dropped.Add(1)
			}
		}
	}
}

// signatures are a few well-known alerts a sensor at a network edge sees.
var signatures = []struct {
	id       int64
	name     string
	category string
	severity int32
	proto    string
	port     uint32
}{
	{2001219, "ET SCAN Potential SSH Scan", "Attempted Information Leak", 2, "TCP", 22},
	{2010935, "ET SCAN Suspicious inbound to MSSQL port 1433", "Potentially Bad Traffic", 2, "TCP", 1433},
	{2027865, "ET INFO Observed DNS Query to .cloud TLD", "Potentially Bad Traffic", 3, "UDP", 53},
	{2024897, "ET USER_AGENTS Go HTTP Client User-Agent", "Misc activity", 3, "TCP", 80},
	{2013028, "ET POLICY curl User-Agent Outbound", "Attempted Information Leak", 3, "TCP", 443},
	{2030358, "ET EXPLOIT Possible Apache Log4j RCE Attempt", "Attempted Administrator Privilege Gain", 1, "TCP", 8080},
}

func (s *Simulated) event() *sensorpb.SensorEvent {
	sig := signatures[mrand.IntN(len(signatures))]
	src := netip.AddrFrom4([4]byte{203, 0, 113, byte(1 + mrand.IntN(254))})
	dst := netip.AddrFrom4([4]byte{10, 20, byte(mrand.IntN(4)), byte(1 + mrand.IntN(254))})
	srcPort := uint32(1024 + mrand.IntN(64511))
	now := time.Now().UTC()
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	id := fmt.Sprintf("%s-%d-%s", s.cfg.SensorID, s.seq.Add(1), hex.EncodeToString(rnd[:]))
	raw, _ := json.Marshal(map[string]any{
		"timestamp": now.Format("2006-01-02T15:04:05.000000-0700"), "event_type": "alert",
		"src_ip": src.String(), "src_port": srcPort, "dest_ip": dst.String(), "dest_port": sig.port, "proto": sig.proto,
		"alert": map[string]any{"action": "allowed", "gid": 1, "signature_id": sig.id, "rev": 1,
			"signature": sig.name, "category": sig.category, "severity": sig.severity},
	})
	return &sensorpb.SensorEvent{
		EventId: id, Time: timestamppb.New(now), Kind: "alert",
		SrcIp: src.String(), SrcPort: srcPort, DestIp: dst.String(), DestPort: sig.port, Protocol: sig.proto,
		Alert:   &sensorpb.Alert{SignatureId: sig.id, Signature: sig.name, Category: sig.category, Severity: sig.severity},
		RawJson: raw,
	}
}
