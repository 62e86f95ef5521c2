# syntax=docker/dockerfile:1.7
# tether-gateway: the MCP Streamable HTTP edge gateway.
#
# Build from the repository root (the context is the whole monorepo; the
# ignore file next to this one keeps node_modules, dist and .git out):
#   docker build -f deploy/docker/gateway.Dockerfile -t tether-gateway .
#
# Stages: `build` compiles the workspaces with tsc; `runtime-deps` installs the
# production dependencies of the gateway and of the @tether/* workspaces it
# uses (and nothing else, see runtime-manifest.mjs) next to their compiled
# dist/; the final stage is distroless Node: no shell, no package manager,
# runs as uid 65532.
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
RUN npx tsc -b services/gateway

FROM ${BUILD_BASE} AS runtime-deps
COPY --from=build /src /src
COPY deploy/docker/runtime-manifest.mjs /tmp/runtime-manifest.mjs
RUN node /tmp/runtime-manifest.mjs /src services/gateway /app > /tmp/workspaces \
 && cd /app \
 && npm install --omit=dev --no-audit --no-fund --ignore-scripts \
 && while read -r dir; do cp -R "/src/$dir/dist" "/app/$dir/dist"; done < /tmp/workspaces
COPY deploy/docker/healthcheck.mjs /app/healthcheck.mjs

FROM ${BASE} AS runtime
WORKDIR /app
COPY --from=runtime-deps /app /app
# Listen on every interface inside the container; flags still win over these.
ENV NODE_ENV=production \
    TETHER_HOST=0.0.0.0 \
    TETHER_PORT=8080
USER 65532:65532
EXPOSE 8080
# /readyz: 200 when ready, 503 while draining or when the log is unreachable.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["/nodejs/bin/node", "/app/healthcheck.mjs", "http"]
# SIGTERM drains (--drain-timeout, default 10 s): give `docker stop` more.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/nodejs/bin/node", "services/gateway/dist/main.js"]
