# syntax=docker/dockerfile:1.7
# Demo upstream MCP server for deploy/compose: the official-SDK server of the
# test kit (packages/testing, startMcpUpstream) with an event store, behind
# deploy/demo-upstream/server.mjs. Not for production: it is the thing you
# replace with your own MCP server.
#
#   docker build -f deploy/docker/demo-upstream.Dockerfile -t tether-demo-upstream .
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
RUN npx tsc -b packages/testing

FROM ${BUILD_BASE} AS runtime-deps
COPY --from=build /src /src
COPY deploy/docker/runtime-manifest.mjs /tmp/runtime-manifest.mjs
RUN node /tmp/runtime-manifest.mjs /src packages/testing /app > /tmp/workspaces \
 && cd /app \
 && npm install --omit=dev --no-audit --no-fund --ignore-scripts \
 && while read -r dir; do cp -R "/src/$dir/dist" "/app/$dir/dist"; done < /tmp/workspaces
COPY deploy/demo-upstream/server.mjs /app/demo-upstream/server.mjs
COPY deploy/docker/healthcheck.mjs /app/healthcheck.mjs

FROM ${BASE} AS runtime
WORKDIR /app
COPY --from=runtime-deps /app /app
ENV NODE_ENV=production \
    DEMO_UPSTREAM_HOST=0.0.0.0 \
    DEMO_UPSTREAM_PORT=3001
USER 65532:65532
EXPOSE 3001
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/nodejs/bin/node", "/app/healthcheck.mjs", "http", "http://127.0.0.1:3001/healthz"]
ENTRYPOINT ["/nodejs/bin/node", "demo-upstream/server.mjs"]
