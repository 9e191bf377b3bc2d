# syntax=docker/dockerfile:1
# The sensor agent (apps/sensor-agent). It only dials out (control plane
# HTTPS and gRPC, NATS), so it exposes no port.
# Build from the repository root (the build context must hold go.work and proto/):
#   docker build -f deploy/sensor-agent.Dockerfile --build-arg VERSION="$(git describe --tags --always --dirty)" -t rxc-sensor-agent .

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Module files first: the download layer is reused until a go.mod or go.sum changes.
COPY go.mod go.sum go.work go.work.sum ./
COPY proto/go.mod proto/go.sum ./proto/
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/rxc-project/rxc/internal/buildinfo.Version=${VERSION}" \
      -o /out/sensor-agent ./apps/sensor-agent
# The agent keeps its key, certificate and NATS creds here (mount a volume).
RUN mkdir -p /out/state/var/lib/rxc && chmod 0700 /out/state/var/lib/rxc

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build --chown=65532:65532 /out/state/ /
COPY --from=build /out/sensor-agent /usr/local/bin/sensor-agent
USER 65532:65532
# Arguments are the agent's own subcommand and flags (see its usage).
ENTRYPOINT ["/usr/local/bin/sensor-agent"]
