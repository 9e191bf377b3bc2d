# syntax=docker/dockerfile:1
# The reference sensor agent (apps/sensor-agent). It only dials out (control
# plane HTTPS and gRPC, NATS), so it exposes no port. Its key, certificate,
# token and NATS creds live in RXC_STATE_DIR: keep that on a volume.
# Build from the repository root (the build context must hold go.work, proto/ and sdk/):
#   docker build -f deploy/sensor-agent.Dockerfile --build-arg VERSION="$(git describe --tags --always --dirty)" -t rxc-sensor-agent .
#   docker run --read-only -v rxc-sensor:/var/lib/rxc -e RXC_API_BASE_URL=https://rxc.example.com -e RXC_CLAIM_CODE=… rxc-sensor-agent

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Module files first: the download layer is reused until a go.mod or go.sum changes.
COPY go.mod go.sum go.work go.work.sum ./
COPY proto/go.mod proto/go.sum ./proto/
COPY sdk/go.mod sdk/go.sum ./sdk/
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/rxc-project/rxc/apps/internal/buildinfo.Version=${VERSION}" \
      -o /out/sensor-agent ./apps/sensor-agent
# The state volume's mount point, owned by the runtime user (0700).
RUN mkdir -p /out/state/var/lib/rxc && chmod 0700 /out/state/var/lib/rxc

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build --chown=65532:65532 /out/state/ /
COPY --from=build /out/sensor-agent /usr/local/bin/sensor-agent
USER 65532:65532
ENV RXC_STATE_DIR=/var/lib/rxc/sensor
ENTRYPOINT ["/usr/local/bin/sensor-agent"]
# Enrol on the first run (RXC_CLAIM_CODE), resume from RXC_STATE_DIR later.
CMD ["run"]
