# The operator image: a static binary on a distroless, non-root base with no
# shell, for linux/amd64 and linux/arm64. Build with `make docker-build`, or
# `make docker-buildx` for both platforms, where a Docker engine runs.
#
# The base images are pinned by digest: a tag can be moved to other content.
# `make pin-base-images` resolves the tags again (it needs registry access).
ARG GO_IMAGE=golang:1.26@sha256:3aff6657219a4d9c14e27fb1d8976c49c29fddb70ba835014f477e1c70636647
ARG BASE_IMAGE=gcr.io/distroless/static:nonroot@sha256:f7f8f729987ad0fdf6b05eeeae94b26e6a0f613bdf46feea7fc40f7bd72953e6

# Go cross-compiles without cgo: the build runs on the builder's platform
# for every target, with no emulation.
FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=0.0.0-dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath \
      -ldflags "-s -w -X github.com/gpu-operator/gpu-operator/internal/version.Version=${VERSION}" \
      -o /out/gpu-operator ./cmd/gpu-operator

FROM ${BASE_IMAGE}
ARG VERSION=0.0.0-dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="gpu-operator" \
      org.opencontainers.image.description="Turns nodes with NVIDIA GPUs into schedulable GPU capacity" \
      org.opencontainers.image.source="https://github.com/gpu-operator/gpu-operator" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /out/gpu-operator /gpu-operator
USER 65532:65532
ENTRYPOINT ["/gpu-operator"]
