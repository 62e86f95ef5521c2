# syntax=docker/dockerfile:1.7
# tether-session-log: the gRPC cursor API over the session log.
#
# Build from the repository root:
#   docker build -f deploy/docker/session-log.Dockerfile -t tether-session-log .
#
# Same stages as gateway.Dockerfile: tsc build, production dependencies of
# this service's workspaces only, distroless Node runtime as uid 65532.
# Bases: the public images by default, so `docker build` anywhere needs no
# argument. Where none can be pulled, `npm run images` passes local stand-ins
# built from Debian's archive and the npm registry (scripts/image-base.sh):
#   --build-arg BUILD_BASE=localhost/tether-build-base:node24 --build-arg BASE=localhost/tether-base:node24
ARG NODE_MAJOR=24
ARG BUILD_BASE=node:${NODE_MAJOR}-bookworm-slim
ARG BASE=gcr.io/distroless/nodejs${NODE_MAJOR}-debian12:nonroot

FROM ${BUILD_BASE} AS build
WORKDIR /src
COPY package.json package-lock.json tsconfig.base.json tsconfig.json ./
COPY packages/ packages/
COPY services/ services/
COPY examples/ examples/
RUN npm ci --no-audit --no-fund --ignore-scripts
RUN npx tsc -b services/session-log

FROM ${BUILD_BASE} AS runtime-deps
COPY --from=build /src /src
COPY deploy/docker/runtime-manifest.mjs /tmp/runtime-manifest.mjs
RUN node /tmp/runtime-manifest.mjs /src services/session-log /app > /tmp/workspaces \
 && cd /app \
 && npm install --omit=dev --no-audit --no-fund --ignore-scripts \
 && while read -r dir; do cp -R "/src/$dir/dist" "/app/$dir/dist"; done < /tmp/workspaces
COPY deploy/docker/healthcheck.mjs /app/healthcheck.mjs

FROM ${BASE} AS runtime
WORKDIR /app
COPY --from=runtime-deps /app /app
ENV NODE_ENV=production \
    TETHER_GRPC_HOST=0.0.0.0 \
    TETHER_GRPC_PORT=50051
USER 65532:65532
EXPOSE 50051
# Standard gRPC health service, service "" (plaintext; with --tls-cert, probe
# from outside with grpc_health_probe -tls instead).
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["/nodejs/bin/node", "/app/healthcheck.mjs", "grpc"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/nodejs/bin/node", "services/session-log/dist/main.js"]
