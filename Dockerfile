# limitnode's image: a static binary on a distroless base, running as a
# non-root user, its data in the /data volume.
#
#   docker build -t limitnode .
#   docker run -p 127.0.0.1:7070:7070 -v limitnode-data:/data limitnode
#
# With no arguments the container runs one node with its HTTP API on port
# 7070 and its Raft port on 127.0.0.1:7071 (alone it needs no other member);
# deploy/docker-compose.yml runs three that form a cluster.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/limitnode ./cmd/limitnode \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/limitnode /usr/local/bin/limitnode
# The volume's mount point belongs to the non-root user (65532), so that a
# new named volume is writable.
COPY --from=build --chown=65532:65532 /out/data /data
USER nonroot:nonroot
ENV LIMITNODE_DATA=/data \
    LIMITNODE_HTTP=0.0.0.0:7070
VOLUME /data
EXPOSE 7070 7071
# limitnode health asks 127.0.0.1:7070/readyz: healthy once the node is a
# member that knows its leader. With another -http port, or HTTPS, set
# LIMITNODE_ADDR (https://127.0.0.1:PORT) and LIMITNODE_CA for it.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["/usr/local/bin/limitnode", "health", "-timeout", "3s"]
ENTRYPOINT ["/usr/local/bin/limitnode"]
