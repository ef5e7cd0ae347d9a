# syntax=docker/dockerfile:1
# The images of hcc-controller and hcc-api, one binary each:
#
#   docker build --build-arg BINARY=hcc-controller -t ghcr.io/clerum/hcc-controller:TAG .
#   docker build --build-arg BINARY=hcc-api        -t ghcr.io/clerum/hcc-api:TAG .
#
# The build context is the repository root. The binary is built as
# `make build` builds it (CGO_ENABLED=0, -trimpath, the same -ldflags), so
# it is static and runs in an image with no libc and no shell.

FROM golang:1.26 AS build
# hcc-controller or hcc-api: the command under cmd/ to build.
ARG BINARY=hcc-controller
# What `make build` takes from git describe and git rev-parse; the context
# holds no .git (.dockerignore), so they are passed in.
ARG VERSION=dev
ARG COMMIT=unknown
WORKDIR /src
# Modules first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    test -d "cmd/${BINARY}" && \
    CGO_ENABLED=0 go build -trimpath \
      -ldflags "-X github.com/clerum/hcc/pkg/version.Version=${VERSION} -X github.com/clerum/hcc/pkg/version.Commit=${COMMIT}" \
      -o /out/hcc "./cmd/${BINARY}"

# distroless static: CA certificates, /etc/passwd with nonroot (65532), no
# shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/hcc /hcc
# The uid the Deployments' securityContext names (deploy/base).
USER 65532:65532
ENTRYPOINT ["/hcc"]
