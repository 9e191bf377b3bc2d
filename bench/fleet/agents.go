package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc/status"

	"github.com/rxc-project/rxc/bench/benchenv"
	sensorpb "github.com/rxc-project/rxc/proto"
	"github.com/rxc-project/rxc/sdk/sensorclient"
)

// agentSpec is what one played agent needs: its identity, key, certificate,
// NATS credentials and address, and its place in the fleet (which spreads
// the fleet's first checks over one heartbeat).
type agentSpec struct {
	ID     string                `json:"id"`
	KeyDER []byte                `json:"key"` // PKCS #8
	Cert   []byte                `json:"cert"`
	Creds  string                `json:"creds"`
	NATS   sensorclient.NATSInfo `json:"nats"`
	Index  int                   `json:"index"`
	key    *ecdsa.PrivateKey
}

// agentsPlan is what a process playing agents is given (a 0600 file).
type agentsPlan struct {
	GRPCAddr  string        `json:"grpcAddr"`
	CAPEM     []byte        `json:"caPem"`
	Heartbeat time.Duration `json:"heartbeat"`
	GRPCIdle  time.Duration `json:"grpcIdle"`
	Total     int           `json:"total"`
	Agents    []agentSpec   `json:"agents"`
}

// agentCounts are the health checks a set of played agents made.
type agentCounts struct {
	checks, errs atomic.Int64
	mu           sync.Mutex
	why          map[string]int
}

func (c *agentCounts) failed(err error) {
	c.errs.Add(1)
	c.mu.Lock()
	c.why[status.Code(err).String()]++
	c.mu.Unlock()
}

func (c *agentCounts) whyCopy() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.why)
}

// playAgents runs the agents of plan the way the agent's loops do when it
// has no event to send: its NATS side connected (commands pulled), a
// status report on NATS and a health check over gRPC every heartbeat, the
// event stream waiting for an event. It returns once every agent is
// connected to NATS and its loops run; stop ends them.
func playAgents(ctx context.Context, plan agentsPlan, counts *agentCounts) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	var loops sync.WaitGroup
	agents := plan.Agents
	grpcs := make([]*sensorclient.GRPC, len(agents))
	cmds := make([]*sensorclient.Commands, len(agents))
	stop = func() {
		cancel()
		loops.Wait()
		for i := range agents {
			if grpcs[i] != nil {
				grpcs[i].Close()
			}
			if cmds[i] != nil {
				cmds[i].Close()
			}
		}
	}
	quiet := slog.New(slog.DiscardHandler)
	err = benchenv.Parallel(ctx, len(agents), 32, func(i int) error {
		a := agents[i]
		connected := make(chan struct{})
		var once sync.Once
		c, err := sensorclient.NewCommands(sensorclient.CommandsConfig{
			TenantID: "fleet", SensorID: a.ID, NATS: a.NATS, Creds: []byte(a.Creds), Name: "rxc-sensor-" + a.ID,
			Handle:    func(context.Context, sensorclient.Command) {},
			Connected: func() { once.Do(func() { close(connected) }) },
			Logger:    quiet,
		})
		if err != nil {
			return err
		}
		cmds[i] = c
		loops.Go(func() { _ = c.Run(ctx) })
		select {
		case <-connected:
			return nil
		case <-time.After(2 * time.Minute):
			return fmt.Errorf("sensor %s: NATS not connected within 2 minutes", a.ID)
		}
	})
	if err != nil {
		stop()
		return nil, err
	}
	for i, a := range agents {
		key := a.key
		if key == nil {
			k, err := x509.ParsePKCS8PrivateKey(a.KeyDER)
			if err != nil {
				stop()
				return nil, fmt.Errorf("sensor %s: key: %w", a.ID, err)
			}
			key = k.(*ecdsa.PrivateKey)
		}
		g, err := sensorclient.NewGRPC(sensorclient.GRPCConfig{
			Address: plan.GRPCAddr, CAPEM: plan.CAPEM,
			Certificate: tls.Certificate{Certificate: [][]byte{a.Cert}, PrivateKey: key},
			IdleTimeout: plan.GRPCIdle, Logger: quiet,
		})
		if err != nil {
			stop()
			return nil, err
		}
		grpcs[i] = g
		offset := time.Duration(int64(plan.Heartbeat) * int64(a.Index) / int64(plan.Total))
		loops.Go(func() { _ = g.StreamEvents(ctx, nil) })
		loops.Go(func() {
			if !sleepCtx(ctx, offset) {
				return
			}
			beat := time.NewTicker(plan.Heartbeat)
			defer beat.Stop()
			for {
				_ = cmds[i].PublishStatus(ctx, sensorclient.Status{State: sensorclient.StateRunning, At: time.Now(), AgentVersion: "fleet-bench"})
				if _, err := g.Check(ctx, sensorpb.SensorState_SENSOR_STATE_RUNNING, "fleet-bench"); err != nil {
					if ctx.Err() != nil {
						return
					}
					counts.failed(err)
				} else {
					counts.checks.Add(1)
				}
				select {
				case <-ctx.Done():
					return
				case <-beat.C:
				}
			}
		})
	}
	return stop, nil
}

// agentReport is one line a process playing agents writes on its stdout:
// first {"ready": true} once every agent is connected, then its counts,
// cumulative, every half second.
type agentReport struct {
	Ready  bool           `json:"ready,omitempty"`
	Error  string         `json:"error,omitempty"`
	Checks int64          `json:"checks"`
	Errors int64          `json:"errors"`
	Why    map[string]int `json:"why,omitempty"`
}

// serveAgents is a process of its own playing the agents of the plan file
// at path (which it removes once read) until SIGTERM.
func serveAgents(path string) int {
	data, err := os.ReadFile(path)
	_ = os.Remove(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var plan agentsPlan
	if err := json.Unmarshal(data, &plan); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	out := json.NewEncoder(os.Stdout)
	counts := &agentCounts{why: map[string]int{}}
	stop, err := playAgents(ctx, plan, counts)
	if err != nil {
		_ = out.Encode(agentReport{Error: err.Error()})
		return 1
	}
	defer stop()
	_ = out.Encode(agentReport{Ready: true})
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0
		case <-tick.C:
			_ = out.Encode(agentReport{Checks: counts.checks.Load(), Errors: counts.errs.Load(), Why: counts.whyCopy()})
		}
	}
}

// agentProcs are processes playing agents, and what they last reported.
type agentProcs struct {
	cmds []*exec.Cmd
	mu   sync.Mutex
	last []agentReport
}

// spawnAgents splits the sensors over n processes of this program
// (-serve-agents), each given its sensors in a 0600 file, and waits until
// every one has connected its agents.
func (s *stack) spawnAgents(o options, r *replica, sensors []*sensor, n int) (*agentProcs, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	p := &agentProcs{last: make([]agentReport, n)}
	ready := make(chan error, n)
	dir := s.t.TempDir()
	for c := range n {
		plan := agentsPlan{GRPCAddr: r.grpcAddr, CAPEM: s.plane.CAPEM, Heartbeat: o.heartbeat, GRPCIdle: o.grpcIdle, Total: len(sensors)}
		for i := c; i < len(sensors); i += n {
			sn := sensors[i]
			der, err := x509.MarshalPKCS8PrivateKey(sn.key)
			if err != nil {
				p.stop()
				return nil, err
			}
			plan.Agents = append(plan.Agents, agentSpec{ID: sn.id, KeyDER: der, Cert: sn.certDER, Creds: sn.creds, NATS: sn.nats, Index: i})
		}
		data, err := json.Marshal(plan)
		if err != nil {
			p.stop()
			return nil, err
		}
		path := filepath.Join(dir, fmt.Sprintf("agents-%d.json", c))
		if err := os.WriteFile(path, data, 0o600); err != nil {
			p.stop()
			return nil, err
		}
		cmd := exec.Command(self, "-serve-agents", path)
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			p.stop()
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			p.stop()
			return nil, err
		}
		p.cmds = append(p.cmds, cmd)
		go p.read(c, stdout, ready)
	}
	for range n {
		if err := <-ready; err != nil {
			p.stop()
			return nil, err
		}
	}
	return p, nil
}

func (p *agentProcs) read(c int, stdout io.Reader, ready chan<- error) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	announced := false
	for sc.Scan() {
		var rep agentReport
		if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
			continue
		}
		switch {
		case rep.Error != "" && !announced:
			announced = true
			ready <- fmt.Errorf("agent process %d: %s", c, rep.Error)
		case rep.Ready && !announced:
			announced = true
			ready <- nil
		default:
			p.mu.Lock()
			p.last[c] = rep
			p.mu.Unlock()
		}
	}
	if !announced {
		ready <- fmt.Errorf("agent process %d ended before its agents were connected", c)
	}
}

// counts sums what every process last reported.
func (p *agentProcs) counts() (checks, errs int64, why map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	why = map[string]int{}
	for _, r := range p.last {
		checks += r.Checks
		errs += r.Errors
		for k, v := range r.Why {
			why[k] += v
		}
	}
	return checks, errs, why
}

func (p *agentProcs) pids() []int {
	var out []int
	for _, c := range p.cmds {
		if c.Process != nil {
			out = append(out, c.Process.Pid)
		}
	}
	return out
}

// stop ends the processes (SIGTERM, then SIGKILL after 30 s).
func (p *agentProcs) stop() {
	for _, c := range p.cmds {
		_ = c.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range p.cmds {
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = c.Process.Kill()
			<-done
		}
	}
}
