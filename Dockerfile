# statecast's images, for those who build with Docker:
#
#   docker build --target player --build-arg VERSION=v0.1.0 --build-arg COMMIT=$(git rev-parse HEAD) -t statecast/player .
#
# targets: distributor, player, cachectl, sportsbook. `make images` builds the same images
# without a container engine (deploy/internal/ociimage); its test holds this file to the same
# binaries, files, user, ports, entrypoints and labels.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
ARG VERSION=v0.0.0-dev
ARG COMMIT=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static binaries (no libc in the images), without file system paths, with the time zone
# database embedded, stamped with the version; one root file system per image.
ENV CGO_ENABLED=0
RUN set -e; for bin in distributor=./cmd/distributor player=./cmd/player cachectl=./cmd/cachectl sportsbook=./examples/sportsbook/cmd/sportsbook; do \
      name=${bin%%=*}; root=/rootfs/$name; \
      go build -trimpath -tags timetzdata -ldflags "-s -w -X github.com/statecast/statecast/internal/version.Version=${VERSION} -X github.com/statecast/statecast/internal/version.Commit=${COMMIT}" -o $root/usr/local/bin/$name ${bin#*=}; \
      mkdir -p $root/etc $root/home/nonroot $root/tmp; \
      printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > $root/etc/passwd; \
      printf 'root:x:0:\nnonroot:x:65532:\n' > $root/etc/group; \
      chown 65532:65532 $root/home/nonroot; chmod 700 $root/home/nonroot; chmod 1777 $root/tmp; \
    done

FROM scratch AS distributor
ARG VERSION=v0.0.0-dev
ARG COMMIT=unknown
ARG CREATED=1970-01-01T00:00:00Z
COPY --from=build /rootfs/distributor/ /
ENV PATH=/usr/local/bin HOME=/home/nonroot
USER 65532:65532
WORKDIR /
EXPOSE 9102
LABEL org.opencontainers.image.title="distributor" \
      org.opencontainers.image.description="statecast distributor: publishes PostgreSQL views into compacted Kafka topics" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="https://github.com/statecast/statecast" \
      org.opencontainers.image.licenses="Apache-2.0"
ENTRYPOINT ["/usr/local/bin/distributor"]
CMD ["-config", "/etc/statecast/distributor.yaml"]

FROM scratch AS player
ARG VERSION=v0.0.0-dev
ARG COMMIT=unknown
ARG CREATED=1970-01-01T00:00:00Z
COPY --from=build /rootfs/player/ /
ENV PATH=/usr/local/bin HOME=/home/nonroot
USER 65532:65532
WORKDIR /
EXPOSE 7070 7071
LABEL org.opencontainers.image.title="player" \
      org.opencontainers.image.description="statecast player: delivers a stream exactly once and in order to caches over gRPC" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="https://github.com/statecast/statecast" \
      org.opencontainers.image.licenses="Apache-2.0"
ENTRYPOINT ["/usr/local/bin/player"]
CMD ["-config", "/etc/statecast/player.yaml"]

FROM scratch AS cachectl
ARG VERSION=v0.0.0-dev
ARG COMMIT=unknown
ARG CREATED=1970-01-01T00:00:00Z
COPY --from=build /rootfs/cachectl/ /
ENV PATH=/usr/local/bin HOME=/home/nonroot
USER 65532:65532
WORKDIR /
LABEL org.opencontainers.image.title="cachectl" \
      org.opencontainers.image.description="statecast cachectl: tail, get, stats and validate" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="https://github.com/statecast/statecast" \
      org.opencontainers.image.licenses="Apache-2.0"
ENTRYPOINT ["/usr/local/bin/cachectl"]
CMD ["help"]

FROM scratch AS sportsbook
ARG VERSION=v0.0.0-dev
ARG COMMIT=unknown
ARG CREATED=1970-01-01T00:00:00Z
COPY --from=build /rootfs/sportsbook/ /
ENV PATH=/usr/local/bin HOME=/home/nonroot
USER 65532:65532
WORKDIR /
EXPOSE 8080
LABEL org.opencontainers.image.title="sportsbook" \
      org.opencontainers.image.description="statecast example service: an HTTP API served from an embedded cacheclient" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="https://github.com/statecast/statecast" \
      org.opencontainers.image.licenses="Apache-2.0"
ENTRYPOINT ["/usr/local/bin/sportsbook"]
CMD ["-listen", ":8080"]
