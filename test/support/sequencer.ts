import { statSync } from 'node:fs';
import { relative } from 'node:path';
import { BaseSequencer } from 'vitest/node';
import type { TestSpecification } from 'vitest/node';

/**
 * Longest files first, across projects, so the run does not end with one
 * worker busy on a long file while the others idle (issue 25: npm test in
 * 10 minutes on 2 cores).
 *
 * vitest's own order runs projects one after the other (so the gateway e2e
 * suite's gRPC replay came last, about 100 s of mostly one busy worker) and,
 * on a machine without its results cache (every fresh CI run), orders files
 * by size: a short file that runs a 100 s chaos harness started halfway.
 * Here a file's weight is its duration in the results cache when known,
 * else an estimate from its kind: chaos and fuzz harnesses, then e2e, then
 * integration files, then pure ones, larger first within a kind.
 */
export default class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const cache = this.ctx.cache;
    const weight = (spec: TestSpecification): number => {
      const file = relative(root, spec.moduleId);
      const known = cache.getFileTestResults(`${spec.project.name}:${file}`);
      if (known !== undefined && known.duration > 0) return known.duration;
      return estimateMs(file, spec.moduleId, spec.project.name);
    };
    const weights = new Map(files.map((spec) => [spec, weight(spec)]));
    return [...files].sort(
      (a, b) => a.project.config.sequence.groupOrder - b.project.config.sequence.groupOrder || weights.get(b)! - weights.get(a)!,
    );
  }
}

/** A file's duration guessed from its name and size, for a run with no results cache. */
function estimateMs(file: string, path: string, project: string): number {
  let size = 0;
  try {
    size = statSync(path).size;
  } catch {
    // a file vitest found but we cannot stat: weigh it by its kind alone
  }
  const kind =
    /^test\/(chaos|fuzz)\/.*\.(e2e|fuzz)\.test\.ts$/.test(file) ? 60_000
    : file.endsWith('.e2e.test.ts') ? 20_000
    : file.endsWith('.int.test.ts') ? 6_000
    : 500;
  // The gRPC replay of the e2e suite spawns a session-log service beside each stack.
  const replay = project === 'e2e-grpc' ? 1.5 : 1;
  return (kind + size / 10) * replay;
}
