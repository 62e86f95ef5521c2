/**
 * deploy/ cannot be run here (no Docker engine, no cluster), so every file is
 * parsed and cross-checked against the others and against the code: images
 * and build contexts exist, ports and environment variables are the ones the
 * services' own `--help` lists, probes point at declared ports, selectors
 * select, the dashboard queries only the metrics the telemetry package makes.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { findNatsServerBinary, natsServerVersion, natsVersionAtLeast } from '@tether/testing';
import {
  DEPLOY,
  GATEWAY_MAIN,
  INSPECT_MAIN,
  REPO,
  SDK_EXAMPLE_MAIN,
  SESSION_LOG_MAIN,
  composePath,
  deployPath,
  durationSeconds,
  prometheusNames,
  readDockerfile,
  readText,
  readYaml,
  readYamlDocs,
  serviceFlags,
  telemetryInstruments,
  workspaceDirs,
} from './deploy-files.js';
import type { Doc } from './deploy-files.js';

/** The metric names the deployment is built around (issue 6); the telemetry package must make exactly these. */
const METRICS = ['tether.resumes', 'tether.replay.events', 'tether.append.duration', 'tether.stream.lag', 'tether.streams.open', 'tether.sessions.open', 'tether.lease.takeovers', 'tether.upstream.errors', 'tether.sessions.refused', 'tether.auth.refusals', 'tether.tasks', 'tether.tasks.running'];

const gatewayFlags = serviceFlags(GATEWAY_MAIN);
const sessionLogFlags = serviceFlags(SESSION_LOG_MAIN);
const flagDefault = (flags: Map<string, { fallback: string | undefined }>, env: string): string => {
  const value = flags.get(env)?.fallback;
  if (value === undefined) throw new Error(`no default for ${env} in --help`);
  return value;
};
const inspectFlags = serviceFlags(INSPECT_MAIN);
const sdkExampleFlags = serviceFlags(SDK_EXAMPLE_MAIN);
const GATEWAY_PORT = Number(flagDefault(gatewayFlags, 'TETHER_PORT'));
const SESSION_LOG_PORT = Number(flagDefault(sessionLogFlags, 'TETHER_GRPC_PORT'));

/** Which service an image or Dockerfile is, and the flags that service accepts. */
const SERVICES = {
  gateway: { dockerfile: 'deploy/docker/gateway.Dockerfile', workspace: 'services/gateway', main: GATEWAY_MAIN, flags: gatewayFlags, port: GATEWAY_PORT },
  'session-log': { dockerfile: 'deploy/docker/session-log.Dockerfile', workspace: 'services/session-log', main: SESSION_LOG_MAIN, flags: sessionLogFlags, port: SESSION_LOG_PORT },
  inspect: { dockerfile: 'deploy/docker/inspect.Dockerfile', workspace: 'packages/inspect', main: INSPECT_MAIN, flags: inspectFlags, port: Number(flagDefault(inspectFlags, 'TETHER_INSPECT_PORT')) },
  'sdk-example': { dockerfile: 'deploy/docker/sdk-example.Dockerfile', workspace: 'examples/sdk-server', main: SDK_EXAMPLE_MAIN, flags: sdkExampleFlags, port: Number(flagDefault(sdkExampleFlags, 'PORT')) },
} as const;

const tetherEnv = (env: Record<string, unknown> | undefined) => Object.keys(env ?? {}).filter((k) => k.startsWith('TETHER_'));
const hostPort = (url: string) => {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port) };
};

describe('the services these files describe', () => {
  it('listen where the deploy files expect by default: gateway 8080, session-log 50051', () => {
    expect(GATEWAY_PORT).toBe(8080);
    expect(SESSION_LOG_PORT).toBe(50051);
    for (const key of ['TETHER_LOG_REPLICAS', 'TETHER_LOG_PARTITIONS', 'TETHER_LOG_PLACEMENT_TAGS']) expect(gatewayFlags.has(key) && sessionLogFlags.has(key), key).toBe(true);
  });
});

describe('deploy/nginx/tether.conf', () => {
  const conf = readText(deployPath('nginx/tether.conf'));
  const code = conf
    .split('\n')
    .map((l) => l.replace(/#.*$/, ''))
    .join('\n');
  const directive = (name: string) => [...code.matchAll(new RegExp(`^\\s*${name}\\s+([^;]+);`, 'gm'))].map((m) => m[1]!.trim());
  const upstreamBlock = /upstream\s+tether_gateways\s*\{([^}]*)\}/.exec(code)?.[1] ?? '';

  it('round-robins over the include file without pinning sessions', () => {
    expect(upstreamBlock).toContain('include tether/gateways.conf;');
    for (const pinning of ['ip_hash', 'hash', 'sticky', 'least_conn', 'random']) expect(upstreamBlock).not.toMatch(new RegExp(`^\\s*${pinning}\\b`, 'm'));
    expect(code).toMatch(/server\s*\{[^]*include tether\/listen\.conf;/);
    expect(directive('proxy_pass')).toEqual(['http://tether_gateways']);
  });

  it('streams SSE: no buffering, HTTP/1.1 with the Connection header cleared, MCP headers passed', () => {
    expect(directive('proxy_buffering')).toEqual(['off']);
    expect(directive('proxy_request_buffering')).toEqual(['off']);
    expect(directive('gzip')).toEqual(['off']);
    expect(directive('proxy_http_version')).toEqual(['1.1']);
    expect(directive('proxy_set_header')).toContain('Connection ""');
    for (const header of ['Mcp-Session-Id $http_mcp_session_id', 'Last-Event-ID $http_last_event_id', 'Authorization $http_authorization']) expect(directive('proxy_set_header')).toContain(header);
  });

  it("has timeouts and limits that fit the gateway's defaults", () => {
    const readTimeout = durationSeconds(directive('proxy_read_timeout')[0]!);
    // Longer than the idle gap between heartbeats, and than a whole recorded POST stream.
    expect(readTimeout).toBeGreaterThan(durationSeconds(flagDefault(gatewayFlags, 'TETHER_HEARTBEAT')) * 2);
    expect(readTimeout).toBeGreaterThanOrEqual(durationSeconds(flagDefault(gatewayFlags, 'TETHER_REQUEST_DEADLINE')));
    // Upstream keep-alive shorter than the gateway's own (set in gateway.ts), so nginx never reuses a connection the gateway is closing.
    const gatewayKeepAlive = /server\.keepAliveTimeout = ([\d_]+);/.exec(readText(join(REPO, 'services/gateway/src/gateway.ts')));
    expect(gatewayKeepAlive).not.toBeNull();
    expect(durationSeconds(/keepalive_timeout\s+([^;]+);/.exec(upstreamBlock)![1]!)).toBeLessThan(Number(gatewayKeepAlive![1]!.replace(/_/g, '')) / 1000);
    // nginx must not refuse what the gateway accepts.
    const m = /^(\d+)([km]?)$/.exec(directive('client_max_body_size')[0]!)!;
    expect(Number(m[1]) * (m[2] === 'm' ? 1 << 20 : m[2] === 'k' ? 1 << 10 : 1)).toBeGreaterThanOrEqual(Number(flagDefault(gatewayFlags, 'TETHER_MAX_BODY_BYTES')));
    const headerBuffer = /(\d+)k$/.exec(directive('large_client_header_buffers')[0]!)!;
    expect(Number(headerBuffer[1]) * 1024).toBeGreaterThanOrEqual(Number(flagDefault(gatewayFlags, 'TETHER_MAX_HEADER_BYTES')));
  });
});

describe('deploy/docker', () => {
  const workspaces = workspaceDirs();
  const dockerfiles = readdirSync(deployPath('docker')).filter((f) => f.endsWith('.Dockerfile'));

  it('has a Dockerfile for the gateway, the session-log service, the inspector, the SDK example and the demo upstream', () => {
    expect(dockerfiles.sort()).toEqual(['demo-upstream.Dockerfile', 'gateway.Dockerfile', 'inspect.Dockerfile', 'sdk-example.Dockerfile', 'session-log.Dockerfile']);
  });

  for (const file of dockerfiles) {
    describe(file, () => {
      const path = deployPath('docker', file);
      const steps = readDockerfile(path);
      const froms = steps.filter((s) => s.op === 'FROM');
      const last = froms.length - 1;
      const final = steps.filter((s) => s.stage === last);

      it('is multi-stage: named build stages, then a small runtime image that is not the build image', () => {
        expect(froms.length).toBeGreaterThanOrEqual(2);
        for (const from of froms) expect(from.args).toMatch(/\sAS\s+[a-z-]+$/i);
        const base = (s: { args: string }) => s.args.split(/\s+/)[0]!;
        expect(base(froms[last]!)).toBe('${BASE}');
        expect(froms.slice(0, last).every((f) => base(f) === '${BUILD_BASE}')).toBe(true);
        // Only COPY --from in the runtime stage: nothing is built or installed there.
        expect(final.filter((s) => s.op === 'RUN')).toEqual([]);
      });

      it('takes its bases as build arguments whose defaults are the public images (npm run images passes local ones)', () => {
        // Global ARGs, before the first FROM: `docker build` with no argument builds on distroless and node slim.
        const args = new Map(steps.filter((s) => s.op === 'ARG' && s.stage === -1).map((s) => s.args.split('=') as [string, string]));
        expect(args.get('NODE_MAJOR')).toBe('24');
        expect(args.get('BASE')).toBe('gcr.io/distroless/nodejs${NODE_MAJOR}-debian12:nonroot');
        expect(args.get('BUILD_BASE')).toBe('node:${NODE_MAJOR}-bookworm-slim');
      });

      it('runs as a non-root user', () => {
        const users = final.filter((s) => s.op === 'USER').map((s) => s.args);
        expect(users.length).toBeGreaterThan(0);
        const user = users.at(-1)!.split(':')[0]!;
        expect(['root', '0']).not.toContain(user);
        expect(Number(user)).toBe(65532);
      });

      it('copies only files that exist and that its ignore file lets into the context', () => {
        const ignore = readText(`${path}.dockerignore`);
        for (const copy of steps.filter((s) => s.op === 'COPY' && !s.args.startsWith('--from'))) {
          const parts = copy.args.replace(/--chown=\S+\s*/, '').split(/\s+/);
          for (const source of parts.slice(0, -1)) {
            expect(existsSync(join(REPO, source)), `${file}: COPY ${source}`).toBe(true);
            if (source.startsWith('deploy/')) expect(ignore, `${file}.dockerignore re-includes ${source}`).toContain(`!${source}`);
          }
        }
        for (const excluded of ['**/node_modules', '**/dist', '.git']) expect(ignore).toContain(excluded);
      });

      it('builds and installs workspaces that exist, and starts a file that is built from one', () => {
        for (const step of steps.filter((s) => s.op === 'RUN')) {
          for (const m of step.args.matchAll(/tsc -b ([\w/-]+)/g)) expect(workspaces).toContain(m[1]);
          for (const m of step.args.matchAll(/runtime-manifest\.mjs \/src ([\w/-]+) /g)) expect(workspaces).toContain(m[1]);
        }
        const entry = JSON.parse(final.find((s) => s.op === 'ENTRYPOINT')!.args) as string[];
        expect(entry[0]).toBe('/nodejs/bin/node');
        const script = entry[1]!;
        const workdir = final.find((s) => s.op === 'WORKDIR')!.args;
        expect(workdir).toBe('/app');
        if (script.includes('/dist/')) {
          const workspace = script.slice(0, script.indexOf('/dist/'));
          expect(workspaces).toContain(workspace);
          expect(existsSync(join(REPO, workspace, 'src', script.slice(script.indexOf('/dist/') + 6).replace(/\.js$/, '.ts')))).toBe(true);
        } else {
          expect(existsSync(deployPath(script))).toBe(true);
        }
      });

      const service = Object.values(SERVICES).find((s) => s.dockerfile === `deploy/docker/${file}`);
      if (service !== undefined) {
        it("exposes the service's port and sets only environment variables the service knows", () => {
          expect(final.filter((s) => s.op === 'EXPOSE').map((s) => Number(s.args))).toEqual([service.port]);
          const env = final.filter((s) => s.op === 'ENV').flatMap((s) => [...s.args.matchAll(/([A-Z_]+)=(\S+)/g)].map((m) => [m[1]!, m[2]!] as const));
          for (const [name, value] of env) {
            if (name === 'NODE_ENV') continue;
            expect(service.flags.has(name), `${file}: ENV ${name}`).toBe(true);
            if (name === 'PORT' || name.endsWith('_PORT')) expect(Number(value)).toBe(service.port);
            if (name.endsWith('_HOST')) expect(value).toBe('0.0.0.0');
          }
        });
      }
    });
  }

  it("runtime-manifest.mjs keeps exactly a service's workspace closure and no dev dependencies", () => {
    const out = mkdtempSync(join(tmpdir(), 'tether-manifest-'));
    try {
      const run = spawnSync(process.execPath, [deployPath('docker/runtime-manifest.mjs'), REPO, 'services/gateway', out], { encoding: 'utf8' });
      expect(run.status, run.stderr).toBe(0);
      const kept = run.stdout.trim().split('\n');
      expect(kept).toContain('services/gateway');
      expect(kept).toContain('packages/protocol');
      expect(kept).toContain('packages/session-log');
      expect(kept.filter((d) => d === 'packages/testing' || d.startsWith('examples/') || d === 'services/session-log')).toEqual([]);
      const manifest = JSON.parse(readText(join(out, 'package.json'))) as Record<string, unknown>;
      expect(manifest.workspaces).toEqual(kept);
      expect(manifest.devDependencies).toBeUndefined();
      for (const dir of kept) expect(existsSync(join(out, dir, 'package.json'))).toBe(true);
      expect(existsSync(join(out, 'package-lock.json'))).toBe(true);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});

describe('deploy/compose', () => {
  const file = deployPath('compose/compose.yaml');
  const compose = readYaml(file);
  const services = compose.services as Record<string, Doc>;
  const names = Object.keys(services);
  const gateways = names.filter((n) => /^gateway-\d+$/.test(n));
  const natsNodes = names.filter((n) => /^nats-\d+$/.test(n));
  const env = (name: string) => (services[name].environment ?? {}) as Record<string, string>;
  const collector = readYaml(deployPath('compose/otel-collector.yaml'));

  it('parses, and has the whole stack', () => {
    expect(gateways).toEqual(['gateway-1', 'gateway-2', 'gateway-3']);
    expect(natsNodes).toEqual(['nats-1', 'nats-2', 'nats-3']);
    for (const name of ['session-log', 'nginx', 'demo-upstream', 'otel-collector', 'jaeger', 'prometheus', 'grafana']) expect(names).toContain(name);
  });

  it('builds from Dockerfiles that exist, and pulls only pinned images', () => {
    for (const [name, service] of Object.entries(services)) {
      if (service.build !== undefined) {
        const context = composePath(file, service.build.context);
        expect(context, `${name}: build context is the repository root`).toBe(REPO.replace(/\/$/, ''));
        expect(existsSync(join(context, service.build.dockerfile)), `${name}: ${service.build.dockerfile}`).toBe(true);
        expect(existsSync(join(context, `${service.build.dockerfile}.dockerignore`))).toBe(true);
      } else {
        expect(service.image, `${name}: image`).toMatch(/^[\w./-]+:v?\d+\.\d+(\.\d+)?[\w.-]*$/);
      }
    }
    for (const g of gateways) expect(services[g].build.dockerfile).toBe(SERVICES.gateway.dockerfile);
    expect(services['session-log'].build.dockerfile).toBe(SERVICES['session-log'].dockerfile);
    expect(services['demo-upstream'].build.dockerfile).toBe('deploy/docker/demo-upstream.Dockerfile');
  });

  it('mounts files that exist, declares its volumes and secrets, and depends on services that exist', () => {
    for (const [name, service] of Object.entries(services)) {
      for (const volume of (service.volumes ?? []) as string[]) {
        const source = volume.split(':')[0]!;
        if (source.startsWith('.') || source.startsWith('/')) expect(existsSync(composePath(file, source)), `${name}: ${source}`).toBe(true);
        else expect(Object.keys(compose.volumes ?? {}), `${name}: volume ${source}`).toContain(source);
      }
      for (const secret of (service.secrets ?? []) as string[]) expect(existsSync(composePath(file, compose.secrets[secret].file))).toBe(true);
      const deps = Array.isArray(service.depends_on) ? service.depends_on : Object.keys(service.depends_on ?? {});
      for (const dep of deps) expect(names, `${name} depends on ${dep}`).toContain(dep);
    }
  });

  it('sets only environment variables the services know, with the ports they listen on', () => {
    for (const g of gateways) {
      for (const key of tetherEnv(env(g))) expect(gatewayFlags.has(key), `${g}: ${key}`).toBe(true);
      expect(Number(env(g).TETHER_PORT)).toBe(GATEWAY_PORT);
      expect(env(g).TETHER_HOST).toBe('0.0.0.0');
      expect(durationSeconds(env(g).TETHER_DRAIN_TIMEOUT!)).toBeLessThan(durationSeconds(services[g].stop_grace_period));
    }
    for (const key of tetherEnv(env('session-log'))) expect(sessionLogFlags.has(key), `session-log: ${key}`).toBe(true);
    expect(Number(env('session-log').TETHER_GRPC_PORT)).toBe(SESSION_LOG_PORT);
    expect(services['session-log'].ports).toContain(`${SESSION_LOG_PORT}:${SESSION_LOG_PORT}`);
    const ids = gateways.map((g) => env(g).TETHER_INSTANCE_ID);
    expect(new Set(ids).size).toBe(gateways.length);
    for (const g of gateways) expect(env(g).OTEL_RESOURCE_ATTRIBUTES).toContain(`service.instance.id=${env(g).TETHER_INSTANCE_ID}`);
  });

  it('runs a 3-node JetStream cluster that every service uses at R3', () => {
    const natsConf = readText(deployPath('compose/nats/nats.conf'));
    const routes = [...natsConf.matchAll(/nats-route:\/\/([\w-]+):(\d+)/g)].map((m) => `${m[1]}:${m[2]}`);
    const clusterPort = /cluster\s*\{[^}]*listen:\s*[\d.]+:(\d+)/.exec(natsConf)![1];
    expect(routes.sort()).toEqual(natsNodes.map((n) => `${n}:${clusterPort}`));
    const clientPort = Number(/^listen:\s*[\d.]+:(\d+)/m.exec(natsConf)![1]);
    expect(natsConf).toMatch(/jetstream\s*\{[^}]*store_dir:\s*\/data/);
    for (const n of natsNodes) {
      expect(env(n).NATS_SERVER_NAME).toBe(n);
      expect(services[n].volumes).toContain('./nats/nats.conf:/etc/nats/nats.conf:ro');
      expect(services[n].volumes.some((v: string) => v.endsWith(':/data'))).toBe(true);
    }
    for (const name of [...gateways, 'session-log']) {
      expect(env(name).TETHER_LOG_REPLICAS, name).toBe(String(natsNodes.length));
      const urls = env(name).TETHER_NATS_URL!.split(',').map(hostPort);
      expect(urls).toEqual(natsNodes.map((host) => ({ host, port: clientPort })));
    }
  });

  it('gives every process that opens the log one partition count (a process with another refuses to start)', () => {
    // Gateways on --log grpc:// do not open the log; these all do.
    const openers = [...gateways.filter((g) => env(g).TETHER_LOG_URL === undefined), 'session-log'];
    expect(openers.length).toBe(gateways.length + 1);
    const counts = new Set(openers.map((name) => env(name).TETHER_LOG_PARTITIONS));
    expect([...counts]).toHaveLength(1);
    const count = Number([...counts][0]);
    expect(Number.isInteger(count) && count >= 1 && count <= 256, `TETHER_LOG_PARTITIONS=${String([...counts][0])}`).toBe(true);
  });

  it('nats.conf is valid for nats-server (-t)', () => {
    const bin = findNatsServerBinary();
    // `sync_interval` came in 2.10 and 2.9 refuses the whole file (unknown field): check it with the server compose runs.
    expect(natsVersionAtLeast(natsServerVersion(bin), 2, 10), `${bin} is ${natsServerVersion(bin)}; nats.conf needs >= 2.10: NATS_SERVER_BIN=$(scripts/nats-server.sh current)`).toBe(true);
    const run = spawnSync(bin, ['-t', '-c', deployPath('compose/nats/nats.conf')], { encoding: 'utf8', env: { ...process.env, NATS_SERVER_NAME: 'nats-1' } });
    expect(run.status, `${run.stdout}${run.stderr}`).toBe(0);
  });

  it('nats.conf makes JetStream fsync before it acknowledges (sync_interval: always)', () => {
    // An active line of the jetstream block, not a comment (docs/reliability.md, "What an acknowledgement means").
    const jetstreamBlock = /^jetstream\s*\{([^}]*)\}/m.exec(readText(deployPath('compose/nats/nats.conf')))![1]!;
    expect(jetstreamBlock).toMatch(/^\s*sync_interval:\s*"?always"?\s*$/m);
  });

  it('puts nginx with deploy/nginx/tether.conf in front of every gateway, on the port it publishes', () => {
    const nginx = services.nginx;
    expect(nginx.volumes).toContain('../nginx/tether.conf:/etc/nginx/conf.d/default.conf:ro');
    const includeDir = nginx.volumes.find((v: string) => v.endsWith(':/etc/nginx/tether:ro')).split(':')[0];
    const servers = [...readText(join(composePath(file, includeDir), 'gateways.conf')).matchAll(/^\s*server\s+([\w.-]+):(\d+)/gm)].map((m) => `${m[1]}:${m[2]}`);
    expect(servers).toEqual(gateways.map((g) => `${g}:${env(g).TETHER_PORT}`));
    const listen = /^\s*listen\s+(?:[\d.]+:)?(\d+)/m.exec(readText(join(composePath(file, includeDir), 'listen.conf')))![1];
    expect(nginx.ports).toEqual([`8080:${listen}`]);
    for (const g of gateways) expect(Object.keys(services[g].depends_on ?? {})).not.toContain('nginx');
    for (const g of gateways) expect(services[g].ports, `${g} is reached through nginx only`).toBeUndefined();
  });

  it('points the gateways at the demo upstream it runs', () => {
    const demoPort = Number(env('demo-upstream').DEMO_UPSTREAM_PORT);
    for (const g of gateways) {
      const u = new URL(env(g).TETHER_UPSTREAMS!);
      expect([u.hostname, Number(u.port), u.pathname]).toEqual(['demo-upstream', demoPort, '/mcp']);
    }
    expect(services['demo-upstream'].healthcheck.test.join(' ')).toContain(`:${demoPort}/healthz`);
  });

  it('wires telemetry: services → collector (OTLP/HTTP) → Jaeger and Prometheus → Grafana with the dashboard', () => {
    const httpReceiver = hostPort(`http://${collector.receivers.otlp.protocols.http.endpoint}`);
    for (const name of [...gateways, 'session-log']) {
      const e = env(name);
      expect(e.OTEL_SERVICE_NAME, name).toMatch(/^tether-/);
      const endpoint = hostPort(e.OTEL_EXPORTER_OTLP_ENDPOINT!);
      expect(endpoint).toEqual({ host: 'otel-collector', port: httpReceiver.port });
    }
    expect(hostPort(`http://${collector.exporters['otlp/jaeger'].endpoint}`)).toEqual({ host: 'jaeger', port: 4317 });
    expect(collector.service.pipelines.traces.exporters).toContain('otlp/jaeger');
    expect(collector.service.pipelines.metrics.exporters).toContain('prometheus');
    const promPort = hostPort(`http://${collector.exporters.prometheus.endpoint}`).port;
    const prometheus = readYaml(deployPath('compose/prometheus.yaml'));
    expect(prometheus.scrape_configs[0].static_configs[0].targets).toEqual([`otel-collector:${promPort}`]);
    const datasources = readYaml(deployPath('compose/grafana/provisioning/datasources/datasources.yaml')).datasources as Doc[];
    expect(datasources.map((d) => d.url).sort()).toEqual(['http://jaeger:16686', 'http://prometheus:9090']);
    expect(services.grafana.volumes).toContain('../grafana/tether-dashboard.json:/var/lib/grafana/dashboards/tether-dashboard.json:ro');
    const providers = readYaml(deployPath('compose/grafana/provisioning/dashboards/dashboards.yaml')).providers as Doc[];
    expect(providers[0].options.path).toBe('/var/lib/grafana/dashboards');
  });
});

describe('deploy/k8s', () => {
  const dir = deployPath('k8s');
  const kustomization = readYaml(join(dir, 'kustomization.yaml'));
  const docs: Doc[] = (kustomization.resources as string[]).flatMap((f) => readYamlDocs(join(dir, f)));
  const ofKind = (kind: string) => docs.filter((d) => d.kind === kind);
  const deployments = ofKind('Deployment');
  const configMaps = ofKind('ConfigMap');
  const matches = (selector: Record<string, string>, labels: Record<string, string>) => Object.entries(selector).every(([k, v]) => labels[k] === v);
  const serviceOf = (deployment: Doc) => (deployment.metadata.name === 'tether-gateway' ? SERVICES.gateway : SERVICES['session-log']);
  const containerEnv = (deployment: Doc): Record<string, string> => {
    const out: Record<string, string> = {};
    const container = deployment.spec.template.spec.containers[0];
    for (const from of container.envFrom ?? []) Object.assign(out, configMaps.find((c) => c.metadata.name === from.configMapRef.name)?.data ?? {});
    for (const e of container.env ?? []) out[e.name] = e.value ?? '(from field)';
    return out;
  };

  it('parses, with every resource listed in kustomization.yaml', () => {
    for (const f of kustomization.resources as string[]) expect(existsSync(join(dir, f))).toBe(true);
    for (const d of docs) {
      expect(d.apiVersion, JSON.stringify(d.metadata)).toBeTruthy();
      expect(d.metadata?.name).toBeTruthy();
    }
    expect(deployments.map((d) => d.metadata.name).sort()).toEqual(['tether-gateway', 'tether-session-log']);
    expect(ofKind('Namespace').map((n) => n.metadata.name)).toEqual([kustomization.namespace]);
  });

  for (const name of ['tether-gateway', 'tether-session-log']) {
    describe(name, () => {
      const deployment = () => deployments.find((d) => d.metadata.name === name)!;

      it('has readiness, liveness and startup probes on declared ports, a preStop hook, and a grace period longer than preStop + drain', () => {
        const spec = deployment().spec.template.spec;
        const container = spec.containers[0];
        const ports = container.ports as { name: string; containerPort: number }[];
        const probePort = (probe: Doc) => probe.httpGet?.port ?? probe.grpc?.port ?? probe.tcpSocket?.port;
        for (const kind of ['readinessProbe', 'livenessProbe', 'startupProbe']) {
          const port = probePort(container[kind]);
          expect(port, `${name} ${kind}`).toBeDefined();
          expect(ports.some((p) => p.name === port || p.containerPort === port), `${name} ${kind} port ${port}`).toBe(true);
        }
        const preStop = container.lifecycle?.preStop;
        expect(preStop, `${name} preStop`).toBeDefined();
        const preStopSeconds = preStop.sleep?.seconds ?? Number(/setTimeout\([^,]+,\s*(\d+)\)/.exec(preStop.exec.command.join(' '))![1]) / 1000;
        const env = containerEnv(deployment());
        // The gateway drains for up to TETHER_DRAIN_TIMEOUT; session-log gives running calls 5 s.
        const drainSeconds = env.TETHER_DRAIN_TIMEOUT === undefined ? 5 : durationSeconds(env.TETHER_DRAIN_TIMEOUT);
        expect(spec.terminationGracePeriodSeconds).toBeGreaterThan(preStopSeconds + drainSeconds + 1);
      });

      it('probes the right endpoints: gateway /readyz and /healthz over HTTP, session-log the gRPC health service', () => {
        const container = deployment().spec.template.spec.containers[0];
        if (name === 'tether-gateway') {
          expect(container.readinessProbe.httpGet.path).toBe('/readyz');
          expect(container.livenessProbe.httpGet.path).toBe('/healthz');
        } else {
          expect(container.readinessProbe.grpc.port).toBe(SESSION_LOG_PORT);
          expect(container.startupProbe.grpc.port).toBe(SESSION_LOG_PORT);
        }
      });

      it("sets only environment variables the service knows, with the port it exposes, and runs as the image's non-root user", () => {
        const service = serviceOf(deployment());
        const container = deployment().spec.template.spec.containers[0];
        const own = Object.fromEntries(((container.env ?? []) as { name: string; value?: string }[]).map((e) => [e.name, e.value]));
        for (const key of tetherEnv(own)) expect(service.flags.has(key), `${name}: ${key}`).toBe(true);
        const portVar = name === 'tether-gateway' ? 'TETHER_PORT' : 'TETHER_GRPC_PORT';
        expect(Number(own[portVar])).toBe(service.port);
        expect(container.ports[0].containerPort).toBe(service.port);
        const pod = deployment().spec.template.spec.securityContext;
        expect(pod.runAsNonRoot).toBe(true);
        expect(pod.runAsUser).toBe(65532);
        expect(container.securityContext.allowPrivilegeEscalation).toBe(false);
        expect(container.image.split(':')[0]).toBe(kustomization.images.find((i: Doc) => i.name === container.image.split(':')[0])?.name);
      });

      it('has a Service, a PodDisruptionBudget and a HorizontalPodAutoscaler that select it', () => {
        const d = deployment();
        const labels = d.spec.template.metadata.labels as Record<string, string>;
        expect(matches(d.spec.selector.matchLabels, labels)).toBe(true);
        const services = ofKind('Service').filter((s) => matches(s.spec.selector, labels));
        expect(services.length).toBeGreaterThan(0);
        const portNames = (d.spec.template.spec.containers[0].ports as { name: string }[]).map((p) => p.name);
        for (const s of services) {
          expect(s.spec.sessionAffinity ?? 'None').toBe('None');
          for (const p of s.spec.ports) expect(portNames).toContain(p.targetPort);
        }
        const pdbs = ofKind('PodDisruptionBudget').filter((p) => matches(p.spec.selector.matchLabels, labels));
        expect(pdbs).toHaveLength(1);
        const hpas = ofKind('HorizontalPodAutoscaler').filter((h) => h.spec.scaleTargetRef.kind === 'Deployment' && h.spec.scaleTargetRef.name === name);
        expect(hpas).toHaveLength(1);
        const hpa = hpas[0];
        expect(hpa.spec.minReplicas).toBeGreaterThanOrEqual(2);
        // The PDB must leave room to evict at least one pod at minimum scale.
        const pdb = pdbs[0].spec;
        if (pdb.minAvailable !== undefined) expect(pdb.minAvailable).toBeLessThan(hpa.spec.minReplicas);
        else expect(pdb.maxUnavailable).toBeGreaterThanOrEqual(1);
      });
    });
  }

  it('every PodDisruptionBudget selects pods of a Deployment', () => {
    for (const pdb of ofKind('PodDisruptionBudget')) {
      expect(deployments.some((d) => matches(pdb.spec.selector.matchLabels, d.spec.template.metadata.labels)), pdb.metadata.name).toBe(true);
    }
  });

  it('the shared ConfigMap holds only variables a consumer knows, and points at NATS from nats-values.yaml at R3', () => {
    const config = configMaps.find((c) => c.metadata.name === 'tether-config')!.data as Record<string, string>;
    for (const key of tetherEnv(config)) expect(gatewayFlags.has(key) || sessionLogFlags.has(key), key).toBe(true);
    const values = readYaml(join(dir, 'nats-values.yaml'));
    expect(values.config.cluster.enabled).toBe(true);
    expect(values.config.jetstream.enabled).toBe(true);
    expect(values.config.jetstream.fileStore.enabled).toBe(true);
    expect(values.config.jetstream.fileStore.pvc.enabled).toBe(true);
    expect(values.config.cluster.replicas).toBe(3);
    expect(Number(config.TETHER_LOG_REPLICAS)).toBe(values.config.cluster.replicas);
    // Helm release `nats` in the same namespace: Service `nats`, port 4222.
    expect(hostPort(config.TETHER_NATS_URL!)).toEqual({ host: 'nats', port: 4222 });
  });

  it('every Deployment takes the log\'s partition count from the shared ConfigMap, none overrides it', () => {
    const config = configMaps.find((c) => c.metadata.name === 'tether-config')!.data as Record<string, string>;
    const count = Number(config.TETHER_LOG_PARTITIONS);
    expect(Number.isInteger(count) && count >= 1 && count <= 256, `TETHER_LOG_PARTITIONS=${config.TETHER_LOG_PARTITIONS}`).toBe(true);
    for (const deployment of deployments) {
      const container = deployment.spec.template.spec.containers[0];
      expect((container.env ?? []).map((e: Doc) => e.name), deployment.metadata.name).not.toContain('TETHER_LOG_PARTITIONS');
      expect(containerEnv(deployment).TETHER_LOG_PARTITIONS, deployment.metadata.name).toBe(config.TETHER_LOG_PARTITIONS);
    }
  });

  it('the Helm values make JetStream fsync before it acknowledges (config.jetstream.merge.sync_interval: always)', () => {
    // The nats chart (1.x and later) merges config.jetstream.merge into the rendered jetstream {} block.
    const values = readYaml(join(dir, 'nats-values.yaml'));
    expect(values.config.jetstream.merge?.sync_interval).toBe('always');
  });

  it('the Ingress reaches the gateway Service with SSE-safe settings and no affinity', () => {
    const ingress = ofKind('Ingress')[0];
    const backend = ingress.spec.rules[0].http.paths[0].backend.service;
    const service = ofKind('Service').find((s) => s.metadata.name === backend.name)!;
    expect(service.spec.ports.map((p: Doc) => p.name)).toContain(backend.port.name);
    const a = ingress.metadata.annotations as Record<string, string>;
    expect(a['nginx.ingress.kubernetes.io/proxy-buffering']).toBe('off');
    expect(Number(a['nginx.ingress.kubernetes.io/proxy-read-timeout'])).toBeGreaterThanOrEqual(3600);
    expect(Object.keys(a).filter((k) => k.includes('affinity') || k.includes('upstream-hash-by'))).toEqual([]);
  });
});

describe('deploy/grafana/tether-dashboard.json', () => {
  const dashboard = JSON.parse(readText(deployPath('grafana/tether-dashboard.json'))) as Doc;
  const instruments = telemetryInstruments();
  const allowed = new Map(instruments.flatMap((i) => prometheusNames(i).map((n) => [n, i.name] as const)));
  const panels = (dashboard.panels as Doc[]).filter((p) => p.type !== 'row');
  const exprs: string[] = [...panels.flatMap((p) => (p.targets as Doc[]).map((t) => t.expr as string)), ...(dashboard.templating.list as Doc[]).filter((v) => v.type === 'query').map((v) => v.definition as string)];

  it('uses the metric names the telemetry package creates, and those are the deployment\'s names', () => {
    expect(instruments.map((i) => i.name).sort()).toEqual([...METRICS].sort());
  });

  it('parses, every panel has a query on the templated Prometheus datasource, and ids are unique', () => {
    expect(dashboard.uid).toBeTruthy();
    expect(panels.length).toBeGreaterThan(0);
    for (const p of panels) {
      expect(p.datasource.uid, p.title).toBe('${datasource}');
      expect(p.targets.length, p.title).toBeGreaterThan(0);
      for (const t of p.targets) expect(t.expr, p.title).toMatch(/tether_/);
    }
    const ids = (dashboard.panels as Doc[]).map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('references only those metrics, and every one of them', () => {
    const used = new Set<string>();
    for (const expr of exprs) {
      // Series selectors: a metric name followed by `{`, `[` or the end of a call argument.
      const referenced = [...expr.matchAll(/\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{/g)].map((m) => m[1]!);
      const bare = [...expr.matchAll(/\btether_[a-z0-9_]+/g)].map((m) => m[0]);
      for (const name of [...referenced, ...bare]) {
        expect(allowed.has(name), `${name} in ${expr}`).toBe(true);
        used.add(allowed.get(name)!);
      }
    }
    expect([...used].sort()).toEqual([...METRICS].sort());
  });

  it('is the file deploy/README.md documents, with every Prometheus name listed there', () => {
    const readme = readText(join(DEPLOY, 'README.md'));
    for (const name of allowed.keys()) if (!name.endsWith('_sum') && !name.endsWith('_count')) expect(readme, name).toContain(name.replace(/_bucket$/, ''));
  });
});
