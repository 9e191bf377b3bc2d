package deploy

import (
	"encoding/json"
	"fmt"
	gobuild "go/build"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

type instruction struct {
	op, args string
}

// parseDockerfile splits a Dockerfile into instructions, joining continued
// lines and dropping comments.
func parseDockerfile(text string) []instruction {
	var out []instruction
	var cur strings.Builder
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\r\n")
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		op, args, _ := strings.Cut(strings.TrimSpace(cur.String()), " ")
		out = append(out, instruction{strings.ToUpper(op), strings.Join(strings.Fields(args), " ")})
		cur.Reset()
	}
	return out
}

type dockerApp struct {
	name   string
	expose []int
	cmd    []string
}

var dockerApps = []dockerApp{
	{"provisioner", []int{provisionerPort}, []string{"serve"}},
	{"controlplane", []int{apiPort, grpcPort}, []string{"serve"}},
	{"sensor-agent", nil, []string{"run"}},
}

// goMinor is the Go release of go.mod ("1.26" for "go 1.26.8").
func goMinor(t testing.TB) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(readFile(t, filepath.Join(repoRoot, "go.mod")))
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	return m[1]
}

func checkDockerfile(app dockerApp, text, goVersion string) []string {
	var problems []string
	add := func(format string, args ...any) {
		problems = append(problems, app.name+".Dockerfile: "+fmt.Sprintf(format, args...))
	}
	ins := parseDockerfile(text)
	var froms []int
	for i, in := range ins {
		if in.op == "FROM" {
			froms = append(froms, i)
		}
	}
	if len(froms) < 2 {
		add("%d stages, want a build and a runtime stage", len(froms))
		return problems
	}
	build, final := ins[froms[0]:froms[1]], ins[froms[len(froms)-1]:]
	if img := strings.Fields(build[0].args)[0]; !strings.HasPrefix(img, "golang:"+goVersion) {
		add("builds with %s, want golang:%s (go.mod)", img, goVersion)
	}
	copyAll, download := slices.Index(build, instruction{"COPY", ". ."}), -1
	for _, want := range []string{"go.mod go.sum", "proto/go.mod proto/go.sum", "sdk/go.mod sdk/go.sum"} {
		at := slices.IndexFunc(build, func(in instruction) bool { return in.op == "COPY" && strings.HasPrefix(in.args, want) })
		if at < 0 || copyAll < 0 || at > copyAll {
			add("does not copy %s before the sources (module download cache)", want)
		}
	}
	hasArg := false
	var goBuild string
	for i, in := range build {
		if in.op == "RUN" && strings.Contains(in.args, "go mod download") {
			download = i
		}
		if in.op == "ARG" && strings.HasPrefix(in.args, "VERSION") {
			hasArg = true
		}
		if in.op == "RUN" && strings.Contains(in.args, "go build") {
			goBuild = in.args
		}
	}
	if download < 0 || download > copyAll {
		add("no go mod download before the sources are copied")
	}
	if !hasArg {
		add("no ARG VERSION")
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", `-ldflags "-s -w -X github.com/rxc-project/rxc/apps/internal/buildinfo.Version=${VERSION}"`,
		"-o /out/" + app.name + " ", "./apps/" + app.name} {
		if !strings.Contains(goBuild+" ", want) {
			add("go build %q lacks %s", goBuild, want)
		}
	}
	if !strings.HasSuffix(goBuild, "./apps/"+app.name) {
		add("go build does not build ./apps/%s", app.name)
	}

	base := strings.Fields(final[0].args)[0]
	if base != "gcr.io/distroless/static-debian12:nonroot" && base != "scratch" {
		add("runtime image %s, want distroless static nonroot", base)
	}
	var user string
	var expose []int
	var entrypoint, cmd []string
	copied := false
	for _, in := range final {
		switch in.op {
		case "USER":
			user = in.args
		case "EXPOSE":
			for _, p := range strings.Fields(in.args) {
				n, _ := strconv.Atoi(strings.TrimSuffix(p, "/tcp"))
				expose = append(expose, n)
			}
		case "ENTRYPOINT":
			if json.Unmarshal([]byte(in.args), &entrypoint) != nil {
				add("ENTRYPOINT %s is not in exec form", in.args)
			}
		case "CMD":
			if json.Unmarshal([]byte(in.args), &cmd) != nil {
				add("CMD %s is not in exec form", in.args)
			}
		case "HEALTHCHECK":
			add("HEALTHCHECK cannot run in a distroless image (no shell, no client)")
		case "COPY":
			copied = copied || strings.HasSuffix(in.args, "/out/"+app.name+" /usr/local/bin/"+app.name)
		}
	}
	if uid, _, _ := strings.Cut(user, ":"); uid == "" || uid == "0" || uid == "root" {
		add("runs as user %q, want a non-root uid", user)
	}
	slices.Sort(expose)
	if !slices.Equal(expose, app.expose) {
		add("EXPOSE %v, want %v", expose, app.expose)
	}
	if !copied {
		add("the binary is not copied to /usr/local/bin/%s", app.name)
	}
	if !slices.Equal(entrypoint, []string{"/usr/local/bin/" + app.name}) {
		add("ENTRYPOINT %v, want [/usr/local/bin/%s]", entrypoint, app.name)
	}
	if !slices.Equal(cmd, app.cmd) {
		add("CMD %v, want %v", cmd, app.cmd)
	}
	return problems
}

func TestDockerfiles(t *testing.T) {
	t.Parallel()
	goVersion := goMinor(t)
	for _, app := range dockerApps {
		noProblems(t, app.name, checkDockerfile(app, readFile(t, app.name+".Dockerfile"), goVersion))
	}
}

// The package each Dockerfile builds is a command, and the version variable
// its -X flag sets exists.
func TestDockerfileTargetsExist(t *testing.T) {
	t.Parallel()
	for _, app := range dockerApps {
		dir := filepath.Join(repoRoot, "apps", app.name)
		pkg, err := gobuild.ImportDir(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		if pkg.Name != "main" {
			t.Errorf("apps/%s is package %s, want a main package", app.name, pkg.Name)
		}
	}
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(repoRoot, "apps", "internal", "buildinfo", "buildinfo.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if f.Scope.Lookup("Version") == nil {
		t.Error("apps/internal/buildinfo has no Version for -ldflags -X")
	}
}

// keptTop lists the top-level paths a Dockerfile's .dockerignore lets back
// into the build context after excluding everything.
func keptTop(ignore string) map[string]bool {
	kept := map[string]bool{}
	for line := range strings.Lines(ignore) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "!") {
			kept[strings.TrimSuffix(strings.TrimPrefix(line, "!"), "/")] = true
		}
	}
	return kept
}

// Every source folder the binary needs reaches the build context.
func TestDockerignoreKeepsWhatTheBuildNeeds(t *testing.T) {
	t.Parallel()
	for _, app := range dockerApps {
		kept := keptTop(readFile(t, app.name+".Dockerfile.dockerignore"))
		cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.Dir}}{{end}}", "./apps/"+app.name)
		cmd.Dir = repoRoot
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		abs, err := filepath.Abs(repoRoot)
		if err != nil {
			t.Fatal(err)
		}
		for dir := range strings.Lines(string(out)) {
			rel, err := filepath.Rel(abs, strings.TrimSpace(dir))
			if err != nil || strings.HasPrefix(rel, "..") {
				continue // a module from the cache
			}
			if top, _, _ := strings.Cut(rel, string(filepath.Separator)); !kept[top] {
				t.Errorf("%s.Dockerfile.dockerignore leaves out %s, which ./apps/%s needs", app.name, rel, app.name)
			}
		}
		for _, f := range []string{"go.mod", "go.sum", "go.work", "go.work.sum", "proto", "sdk"} {
			if !kept[f] {
				t.Errorf("%s.Dockerfile.dockerignore leaves out %s", app.name, f)
			}
		}
	}
}

func TestDockerfileChecksFail(t *testing.T) {
	t.Parallel()
	goVersion := goMinor(t)
	text := readFile(t, "provisioner.Dockerfile")
	app := dockerApps[0]
	tests := []struct {
		name     string
		old, new string
		want     string
	}{
		{"root user", "USER 65532:65532", "USER root", "non-root uid"},
		{"no user", "USER 65532:65532", "", "non-root uid"},
		{"other package", "./apps/provisioner\n", "./apps/controlplane\n", "does not build ./apps/provisioner"},
		{"cgo", "CGO_ENABLED=0 ", "", "CGO_ENABLED=0"},
		{"no version stamp", "buildinfo.Version=${VERSION}", "buildinfo.Version=dev", "buildinfo.Version"},
		{"full runtime image", "FROM gcr.io/distroless/static-debian12:nonroot", "FROM debian:bookworm", "runtime image"},
		{"old Go", "FROM golang:1.26-bookworm", "FROM golang:1.25-bookworm", "want golang:" + goVersion},
		{"sources before modules", "COPY go.mod go.sum go.work go.work.sum ./\n", "", "go.mod go.sum before the sources"},
		{"wrong port", "EXPOSE 8080", "EXPOSE 8000", "EXPOSE [8000]"},
		{"shell entrypoint", `ENTRYPOINT ["/usr/local/bin/provisioner"]`, "ENTRYPOINT /usr/local/bin/provisioner", "exec form"},
		{"no serve", `CMD ["serve"]`, "", "CMD [], want [serve]"},
		{"healthcheck", `CMD ["serve"]`, "CMD [\"serve\"]\nHEALTHCHECK CMD [\"/usr/local/bin/provisioner\", \"version\"]", "HEALTHCHECK"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			broken := strings.Replace(text, tc.old, tc.new, 1)
			if broken == text {
				t.Fatalf("%q not found in provisioner.Dockerfile", tc.old)
			}
			wantProblem(t, checkDockerfile(app, broken, goVersion), tc.want)
		})
	}
}
