# syntax=docker/dockerfile:1.7
# tether-sdk-example: the example MCP server on @tether/sdk (examples/sdk-server):
# an official-SDK server that any instance of a fleet serves, its sessions,
# events and tasks on NATS JetStream. The image to start from for your own.
#
# Build from the repository root:
#   docker build -f deploy/docker/sdk-example.Dockerfile -t tether-sdk-example .
#
# Same stages as gateway.Dockerfile: tsc build, production dependencies of
# this example's workspaces only, distroless Node runtime as uid 65532.
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
RUN npx tsc -b examples/sdk-server

FROM ${BUILD_BASE} AS runtime-deps
COPY --from=build /src /src
COPY deploy/docker/runtime-manifest.mjs /tmp/runtime-manifest.mjs
RUN node /tmp/runtime-manifest.mjs /src examples/sdk-server /app > /tmp/workspaces \
 && cd /app \
 && npm install --omit=dev --no-audit --no-fund --ignore-scripts \
 && while read -r dir; do cp -R "/src/$dir/dist" "/app/$dir/dist"; done < /tmp/workspaces
COPY deploy/docker/healthcheck.mjs /app/healthcheck.mjs

FROM ${BASE} AS runtime
WORKDIR /app
COPY --from=runtime-deps /app /app
# Listen on every interface inside the container; flags still win over these.
ENV NODE_ENV=production \
    TETHER_SDK_HOST=0.0.0.0 \
    PORT=3000
USER 65532:65532
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["/nodejs/bin/node", "/app/healthcheck.mjs", "http", "http://127.0.0.1:3000/healthz"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/nodejs/bin/node", "examples/sdk-server/dist/main.js"]
