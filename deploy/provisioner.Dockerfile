# syntax=docker/dockerfile:1
# The provisioner: NATS operator authority and URL account resolver, HTTP :8080.
# Build from the repository root (the build context must hold go.work, proto/ and sdk/):
#   docker build -f deploy/provisioner.Dockerfile --build-arg VERSION="$(git describe --tags --always --dirty)" -t rxc-provisioner .

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
      -o /out/provisioner ./apps/provisioner
# Mount points owned by the runtime user, so that a fresh named volume
# mounted there starts out writable by it and closed to others (0700).
RUN mkdir -p /out/state/var/lib/rxc /out/state/var/lib/rxc-state /out/state/nats-shared \
 && chmod 0700 /out/state/var/lib/rxc /out/state/var/lib/rxc-state && chmod 0755 /out/state/nats-shared

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build --chown=65532:65532 /out/state/ /
COPY --from=build /out/provisioner /usr/local/bin/provisioner
# nonroot of the distroless image. No shell and no HTTP client inside, so no
# HEALTHCHECK: probe GET /healthz on :8080 from outside (deploy/README.md).
USER 65532:65532
ENV OPERATOR_SEED_PATH=/var/lib/rxc/operator.nk
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/provisioner"]
CMD ["serve"]
