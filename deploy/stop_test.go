package deploy

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// measuredJetStreamStop is the longest a nats-server node took to stop its
// JetStream (SIGTERM → exit) with 10,000 sensor consumers, measured by
// bench/stop on the reference machine with every supported release, on one
// node (all 10,000 consumers) and on the shipped three-node shape
// (docs/operations.md, "Stopping nats-server"). A node stopped in lame-duck
// mode needs this plus its lame_duck_duration and the second it waits for
// its Raft leaders to move (natsStopNeed).
const measuredJetStreamStop = 121 * time.Second

// measuredRestart is the longest a node took from its start to /healthz
// answering 200 with 10,000 sensor consumers in its store (bench/stop, the
// same runs): a pod's startupProbe must wait at least this long, or
// Kubernetes kills the node while it loads its consumers.
const measuredRestart = 85 * time.Second

// nats-server's defaults when the configuration does not set them.
const (
	defaultLameDuckDuration = 2 * time.Minute
	defaultLameDuckGrace    = 10 * time.Second
)

var (
	lameDuckDurationLine = regexp.MustCompile(`(?m)^\s*lame_duck_duration\s*[:=]?\s*"?([0-9a-z.]+)"?\s*$`)
	lameDuckGraceLine    = regexp.MustCompile(`(?m)^\s*lame_duck_grace_period\s*[:=]?\s*"?([0-9a-z.]+)"?\s*$`)
)

// lameDuck reads lame_duck_duration and lame_duck_grace_period from a
// nats-server configuration, with nats-server's defaults.
func lameDuck(conf string) (duration, grace time.Duration, err error) {
	read := func(re *regexp.Regexp, def time.Duration) (time.Duration, error) {
		m := re.FindStringSubmatch(conf)
		if m == nil {
			return def, nil
		}
		return time.ParseDuration(m[1])
	}
	if duration, err = read(lameDuckDurationLine, defaultLameDuckDuration); err != nil {
		return 0, 0, fmt.Errorf("lame_duck_duration: %w", err)
	}
	if grace, err = read(lameDuckGraceLine, defaultLameDuckGrace); err != nil {
		return 0, 0, fmt.Errorf("lame_duck_grace_period: %w", err)
	}
	return duration, grace, nil
}

// natsStopNeed is how long a node of conf needs to stop at 10,000 sensors:
// in lame-duck mode it moves its Raft leaders (a second), stops JetStream,
// then waits lame_duck_grace_period and closes its clients over the rest
// of lame_duck_duration (nats-server's lameDuckMode); otherwise it stops
// JetStream and exits.
func natsStopNeed(conf string, ldm bool) (time.Duration, error) {
	if !ldm {
		return measuredJetStreamStop, nil
	}
	d, _, err := lameDuck(conf)
	if err != nil {
		return 0, err
	}
	return time.Second + measuredJetStreamStop + d, nil
}

// checkNATSStop: a nats-server node is stopped in lame-duck mode (ldm:
// the signal its supervisor sends, or a preStop hook, reaches nats-server
// as SIGUSR2), and its supervisor waits at least what it needs at 10,000
// sensors before killing it (grace nil: not set, the supervisor's short
// default).
func checkNATSStop(where string, grace *time.Duration, ldm bool, conf string) []string {
	var problems []string
	if !ldm {
		problems = append(problems, where+": nats-server is not stopped in lame-duck mode (its Raft leaders would wait for an election, its clients reconnect all at once)")
	}
	d, g, err := lameDuck(conf)
	if err != nil {
		return append(problems, fmt.Sprintf("%s: %v", where, err))
	}
	if ldm && !lameDuckDurationLine.MatchString(conf) {
		problems = append(problems, fmt.Sprintf("%s: the config leaves lame_duck_duration at nats-server's default %s: set it", where, d))
	}
	if g >= d {
		problems = append(problems, fmt.Sprintf("%s: lame_duck_grace_period %s is not below lame_duck_duration %s", where, g, d))
	}
	need, err := natsStopNeed(conf, ldm)
	if err != nil {
		return append(problems, fmt.Sprintf("%s: %v", where, err))
	}
	switch {
	case grace == nil:
		problems = append(problems, fmt.Sprintf("%s: no stop grace period: the supervisor's default kills nats-server long before the %s it needs at 10,000 sensors (docs/operations.md)", where, need))
	case *grace < need:
		problems = append(problems, fmt.Sprintf("%s: stop grace period %s, below the %s nats-server needs at 10,000 sensors (measured JetStream stop %s; docs/operations.md)", where, *grace, need, measuredJetStreamStop))
	}
	return problems
}

// composeStop is the part of a compose service that decides how it stops.
type composeStop struct {
	Services map[string]struct {
		Entrypoint      []string `yaml:"entrypoint"`
		Command         []string `yaml:"command"`
		StopSignal      string   `yaml:"stop_signal"`
		StopGracePeriod string   `yaml:"stop_grace_period"`
		Volumes         []string `yaml:"volumes"`
	} `yaml:"services"`
}

func loadComposeStop(t testing.TB) *composeStop {
	t.Helper()
	var c composeStop
	if err := yaml.Unmarshal([]byte(readFile(t, "compose.yaml")), &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

// execsNATSServer: the process the signal goes to is nats-server itself
// (directly, or a shell that execs it).
func execsNATSServer(argv []string) bool {
	if len(argv) == 0 {
		return false
	}
	if filepath.Base(argv[0]) == "nats-server" {
		return true
	}
	last := argv[len(argv)-1]
	return regexp.MustCompile(`(^|[;&|]\s*)exec\s+nats-server\b`).MatchString(last)
}

func checkComposeStop(c *composeStop, readConf func(hostPath string) (string, error)) []string {
	var problems []string
	nodes := 0
	for _, name := range sortedKeys(c.Services) {
		if !natsNode.MatchString(name) {
			continue
		}
		nodes++
		s := c.Services[name]
		where := "compose service " + name
		conf := ""
		for _, v := range s.Volumes {
			if src, _, _ := strings.Cut(v, ":"); strings.HasSuffix(src, ".conf") {
				var err error
				if conf, err = readConf(src); err != nil {
					problems = append(problems, fmt.Sprintf("%s: %v", where, err))
				}
			}
		}
		argv := s.Entrypoint
		if len(argv) == 0 {
			argv = s.Command
		}
		if !execsNATSServer(argv) {
			problems = append(problems, where+": the stop signal goes to a shell, not nats-server (exec nats-server)")
		}
		var grace *time.Duration
		if s.StopGracePeriod != "" {
			g, err := time.ParseDuration(s.StopGracePeriod)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: stop_grace_period %q: %v", where, s.StopGracePeriod, err))
				continue
			}
			grace = &g
		}
		problems = append(problems, checkNATSStop(where, grace, s.StopSignal == "SIGUSR2" || s.StopSignal == "USR2", conf)...)
	}
	if nodes == 0 {
		problems = append(problems, "compose.yaml runs no nats-server node")
	}
	return problems
}

// natsPod is the part of the nats StatefulSet that decides how it stops.
type natsPod struct {
	Kind     string `yaml:"kind"`
	Metadata meta   `yaml:"metadata"`
	Spec     struct {
		Template struct {
			Spec struct {
				TerminationGracePeriodSeconds *int64 `yaml:"terminationGracePeriodSeconds"`
				Containers                    []struct {
					Name         string   `yaml:"name"`
					Command      []string `yaml:"command"`
					StartupProbe *struct {
						PeriodSeconds    int `yaml:"periodSeconds"`
						FailureThreshold int `yaml:"failureThreshold"`
					} `yaml:"startupProbe"`
					Lifecycle *struct {
						PreStop *struct {
							Exec *struct {
								Command []string `yaml:"command"`
							} `yaml:"exec"`
						} `yaml:"preStop"`
					} `yaml:"lifecycle"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// sendsLDM: a preStop command that puts the container's nats-server (PID
// 1) into lame-duck mode.
func sendsLDM(cmd []string) bool {
	if len(cmd) == 0 || filepath.Base(cmd[0]) != "nats-server" {
		return false
	}
	j := strings.Join(cmd[1:], " ")
	return regexp.MustCompile(`^(--signal|-sl)[ =]ldm=1$`).MatchString(j)
}

func checkKubeStop(where string, pods []natsPod, conf string) []string {
	var problems []string
	found := false
	for _, p := range pods {
		if p.Kind != "StatefulSet" || p.Metadata.Name != "rxc-nats" {
			continue
		}
		found = true
		spec := p.Spec.Template.Spec
		var grace *time.Duration
		if s := spec.TerminationGracePeriodSeconds; s != nil {
			g := time.Duration(*s) * time.Second
			grace = &g
		}
		ldm := false
		for _, c := range spec.Containers {
			if c.Name != "nats" {
				continue
			}
			if len(c.Command) == 0 || c.Command[0] != "nats-server" {
				problems = append(problems, where+": container nats does not run nats-server as PID 1 (the preStop signals PID 1)")
			}
			ldm = c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Exec != nil && sendsLDM(c.Lifecycle.PreStop.Exec.Command)
			// Kubernetes' defaults: every 10 s, 3 failures.
			period, failures := 10, 3
			if p := c.StartupProbe; p != nil {
				if p.PeriodSeconds > 0 {
					period = p.PeriodSeconds
				}
				if p.FailureThreshold > 0 {
					failures = p.FailureThreshold
				}
			}
			if c.StartupProbe == nil {
				problems = append(problems, where+": container nats has no startupProbe (a node loading 10,000 consumers takes about a minute to answer /healthz)")
			} else if w := time.Duration(period*failures) * time.Second; w < measuredRestart {
				problems = append(problems, fmt.Sprintf("%s: the startupProbe gives nats-server %s to start, below the %s it needs with 10,000 consumers (docs/operations.md)", where, w, measuredRestart))
			}
		}
		problems = append(problems, checkNATSStop(where+" StatefulSet rxc-nats", grace, ldm, conf)...)
	}
	if !found {
		problems = append(problems, where+": no StatefulSet rxc-nats")
	}
	return problems
}

func kubeNATSPods(t testing.TB) []natsPod {
	t.Helper()
	docs, err := decodeAll([]byte(readFile(t, filepath.Join(kubeDir, "nats.yaml"))))
	if err != nil {
		t.Fatal(err)
	}
	var pods []natsPod
	for _, d := range docs {
		var p natsPod
		decode(t, d, &p)
		pods = append(pods, p)
	}
	return pods
}

func chartNATSPods(t testing.TB) ([]natsPod, string) {
	t.Helper()
	m, byKind, err := renderChart(t)
	if err != nil {
		t.Fatal(err)
	}
	var pods []natsPod
	for _, d := range byKind["StatefulSet"] {
		var p natsPod
		decode(t, d, &p)
		pods = append(pods, p)
	}
	return pods, m.configs["rxc-nats-config"]["nats.conf"]
}

// The shipped manifests stop nats-server in lame-duck mode and give it what
// it needs at 10,000 sensors before killing it.
func TestNATSStopGracePeriods(t *testing.T) {
	t.Parallel()
	noProblems(t, "compose.yaml", checkComposeStop(loadComposeStop(t), readHostConf))
	noProblems(t, "kubernetes/", checkKubeStop("kubernetes/", kubeNATSPods(t), loadManifests(t).configs["rxc-nats-config"]["nats.conf"]))
	pods, conf := chartNATSPods(t)
	noProblems(t, "helm chart", checkKubeStop("helm chart", pods, conf))
}

func TestNATSStopChecksFail(t *testing.T) {
	t.Parallel()
	compose := []struct {
		name   string
		mutate func(c *composeStop) func(string) string
		want   string
	}{
		{"no grace period", func(c *composeStop) func(string) string {
			s := c.Services["nats-2"]
			s.StopGracePeriod = ""
			c.Services["nats-2"] = s
			return nil
		}, "nats-2: no stop grace period"},
		{"grace below the measured stop", func(c *composeStop) func(string) string {
			s := c.Services["nats-1"]
			s.StopGracePeriod = "60s"
			c.Services["nats-1"] = s
			return nil
		}, "nats-1: stop grace period 1m0s, below"},
		{"plain SIGTERM", func(c *composeStop) func(string) string {
			s := c.Services["nats-3"]
			s.StopSignal = ""
			c.Services["nats-3"] = s
			return nil
		}, "nats-3: nats-server is not stopped in lame-duck mode"},
		{"signal to the shell", func(c *composeStop) func(string) string {
			s := c.Services["nats-1"]
			s.Entrypoint = append(s.Entrypoint[:len(s.Entrypoint)-1:len(s.Entrypoint)-1], strings.Replace(s.Entrypoint[len(s.Entrypoint)-1], "exec nats-server", "nats-server", 1))
			c.Services["nats-1"] = s
			return nil
		}, "nats-1: the stop signal goes to a shell"},
		{"longer lame duck than the grace allows", func(*composeStop) func(string) string {
			return func(conf string) string { return lameDuckDurationLine.ReplaceAllString(conf, "lame_duck_duration: 5m") }
		}, "below the"},
		{"lame duck left at its default", func(*composeStop) func(string) string {
			return func(conf string) string { return lameDuckDurationLine.ReplaceAllString(conf, "") }
		}, "leaves lame_duck_duration at nats-server's default"},
	}
	for _, tc := range compose {
		t.Run("compose/"+tc.name, func(t *testing.T) {
			c := loadComposeStop(t)
			edit := tc.mutate(c)
			read := readHostConf
			if edit != nil {
				read = func(p string) (string, error) {
					s, err := readHostConf(p)
					return edit(s), err
				}
			}
			wantProblem(t, checkComposeStop(c, read), tc.want)
		})
	}
	conf := loadManifests(t).configs["rxc-nats-config"]["nats.conf"]
	kube := []struct {
		name   string
		mutate func(p *natsPod) string
		want   string
	}{
		{"no grace period", func(p *natsPod) string { p.Spec.Template.Spec.TerminationGracePeriodSeconds = nil; return conf }, "no stop grace period"},
		{"grace below the measured stop", func(p *natsPod) string {
			s := int64(90)
			p.Spec.Template.Spec.TerminationGracePeriodSeconds = &s
			return conf
		}, "stop grace period 1m30s, below"},
		{"no preStop", func(p *natsPod) string { p.Spec.Template.Spec.Containers[0].Lifecycle = nil; return conf }, "not stopped in lame-duck mode"},
		{"preStop signals another process", func(p *natsPod) string {
			p.Spec.Template.Spec.Containers[0].Lifecycle.PreStop.Exec.Command = []string{"nats-server", "--signal", "ldm=7"}
			return conf
		}, "not stopped in lame-duck mode"},
		{"nats-server not PID 1", func(p *natsPod) string {
			p.Spec.Template.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "nats-server -c /etc/nats/config/nats.conf"}
			return conf
		}, "does not run nats-server as PID 1"},
		{"longer lame duck than the grace allows", func(*natsPod) string {
			return lameDuckDurationLine.ReplaceAllString(conf, "    lame_duck_duration: 4m")
		}, "below the"},
		{"no startupProbe", func(p *natsPod) string { p.Spec.Template.Spec.Containers[0].StartupProbe = nil; return conf }, "has no startupProbe"},
		{"startupProbe too short", func(p *natsPod) string {
			p.Spec.Template.Spec.Containers[0].StartupProbe.FailureThreshold = 6
			return conf
		}, "the startupProbe gives nats-server 30s to start, below"},
		{"grace period not below the duration", func(*natsPod) string {
			return conf + "\nlame_duck_grace_period: 30s\n"
		}, "lame_duck_grace_period 30s is not below lame_duck_duration 30s"},
	}
	for _, tc := range kube {
		t.Run("kubernetes/"+tc.name, func(t *testing.T) {
			pods := kubeNATSPods(t)
			var c string
			for i := range pods {
				if pods[i].Kind == "StatefulSet" {
					c = tc.mutate(&pods[i])
				}
			}
			if c == "" {
				t.Fatal("no StatefulSet in kubernetes/nats.yaml")
			}
			wantProblem(t, checkKubeStop("kubernetes/", pods, c), tc.want)
		})
	}
}
