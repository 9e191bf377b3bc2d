# syntax=docker/dockerfile:1
# The control plane: HTTP API :5009, sensor gRPC with mTLS :5010.
# Build from the repository root (the build context must hold go.work, proto/ and sdk/):
#   docker build -f deploy/controlplane.Dockerfile --build-arg VERSION="$(git describe --tags --always --dirty)" -t rxc-controlplane .

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
      -o /out/controlplane ./apps/controlplane
# The CA volume's mount point, owned by the runtime user; init-ca creates
# CA_DIR below it with mode 0700.
RUN mkdir -p /out/state/var/lib/rxc && chmod 0700 /out/state/var/lib/rxc

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build --chown=65532:65532 /out/state/ /
COPY --from=build /out/controlplane /usr/local/bin/controlplane
# nonroot of the distroless image. No shell and no HTTP client inside, so no
# HEALTHCHECK: probe GET /healthz (liveness) and GET /readyz (readiness) on
# :5009 from outside (deploy/README.md).
USER 65532:65532
ENV CA_DIR=/var/lib/rxc/ca
EXPOSE 5009 5010
ENTRYPOINT ["/usr/local/bin/controlplane"]
CMD ["serve"]
