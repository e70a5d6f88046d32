# Two binaries, seckill-proxy and seckill-sink, in a small image that runs as a non-root user.
# Build: docker build -t seckill-proxy .
# Run:   docker run -e SECKILL_REDIS_ADDRS=... -e SECKILL_KAFKA_BROKERS=... -e SECKILL_MYSQL_DSN=... \
#          -e SECKILL_USERS=shop:...:app,ops:...:admin -e SECKILL_ADMIN_TOKEN=... \
#          -p 6380:6380 seckill-proxy [-check-config -strict]
# Without SECKILL_USERS (or SECKILL_PASSWORD) the proxy is in protected mode: it refuses every
# client from outside the container's loopback (-DENIED), and -check-config warns (with -strict,
# exits 2: a deployment pipeline's gate). Without
# SECKILL_ADMIN_TOKEN the admin port serves only /livez, /readyz, /healthz and /metrics to the
# network.
#        docker run ... --entrypoint /seckill-sink seckill-proxy
# The base images are build arguments, for a registry mirror or a stand-in built where the
# public registries cannot be reached: --build-arg BUILDER_IMAGE=... --build-arg RUNTIME_IMAGE=...
# The runtime image must have a nonroot user and group (as distroless's :nonroot tag has).
ARG BUILDER_IMAGE=golang:1.26-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot
FROM ${BUILDER_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/ ./cmd/seckill-proxy ./cmd/seckill-sink

FROM ${RUNTIME_IMAGE}
COPY --from=build /out/seckill-proxy /out/seckill-sink /
USER nonroot:nonroot
ENV SECKILL_LISTEN=0.0.0.0:6380 SECKILL_ADMIN_LISTEN=0.0.0.0:6381 SECKILL_SINK_ADMIN_LISTEN=0.0.0.0:6382
EXPOSE 6380 6381 6382
ENTRYPOINT ["/seckill-proxy"]
