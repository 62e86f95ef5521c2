# syntax=docker/dockerfile:1.7
# tether-inspect: the operators' read-only page over the log (packages/inspect).
# tether-admin, the same package's command line, is in the image too:
#   docker run --rm --entrypoint /nodejs/bin/node tether-inspect packages/inspect/dist/admin-main.js --help
#
# Build from the repository root:
#   docker build -f deploy/docker/inspect.Dockerfile -t tether-inspect .
#
# Same stages as gateway.Dockerfile: tsc build (the server and the page's
# browser modules), production dependencies of this package's workspaces
# only, distroless Node runtime as uid 65532. It never serves without a
# token: give TETHER_INSPECT_TOKEN_FILE (a mounted secret) or --token.
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
# The page's modules (src/web) are their own project, built to dist/browser/.
RUN npx tsc -b packages/inspect packages/inspect/src/web

FROM ${BUILD_BASE} AS runtime-deps
COPY --from=build /src /src
COPY deploy/docker/runtime-manifest.mjs /tmp/runtime-manifest.mjs
# The page itself (html, css, svg: the package's "files") is read from src/web at startup.
RUN node /tmp/runtime-manifest.mjs /src packages/inspect /app > /tmp/workspaces \
 && cd /app \
 && npm install --omit=dev --no-audit --no-fund --ignore-scripts \
 && while read -r dir; do cp -R "/src/$dir/dist" "/app/$dir/dist"; done < /tmp/workspaces \
 && mkdir -p /app/packages/inspect/src/web \
 && cp /src/packages/inspect/src/web/*.html /src/packages/inspect/src/web/*.css /src/packages/inspect/src/web/*.svg /app/packages/inspect/src/web/
COPY deploy/docker/healthcheck.mjs /app/healthcheck.mjs

FROM ${BASE} AS runtime
WORKDIR /app
COPY --from=runtime-deps /app /app
# Listen on every interface inside the container; flags still win over these.
ENV NODE_ENV=production \
    TETHER_INSPECT_HOST=0.0.0.0 \
    TETHER_INSPECT_PORT=8090
USER 65532:65532
EXPOSE 8090
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["/nodejs/bin/node", "/app/healthcheck.mjs", "http", "http://127.0.0.1:8090/healthz"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/nodejs/bin/node", "packages/inspect/dist/inspect-main.js"]
