# The operator image: a static binary on a distroless, non-root base with no
# shell. Build with `make docker-build` where a Docker engine runs.
FROM golang:1.26 AS build
ARG VERSION=0.0.0-dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/gpu-operator/gpu-operator/internal/version.Version=${VERSION}" \
      -o /out/gpu-operator ./cmd/gpu-operator

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/gpu-operator /gpu-operator
USER 65532:65532
ENTRYPOINT ["/gpu-operator"]
