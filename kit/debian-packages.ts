/**
 * Programs some tests drive that npm cannot ship: Debian's Chromium (the dashboard's browser test,
 * through playwright-core, which downloads no browser), promtool from Debian's prometheus
 * package (checks the alert rules) and PgBouncer (the pooler pass, kit/pgbouncer.ts). Installed with apt-get when missing, so `npm test` needs no
 * manual step; a machine where that is impossible gets an error that says what to install.
 */
import { execFile } from 'node:child_process';
import { existsSync, writeFileSync, rmSync } from 'node:fs';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface DebianTool {
  /** The program's absolute path once installed. */
  path: string;
  /** The Debian package that provides it. */
  pkg: string;
}

export const CHROMIUM: DebianTool = { path: '/usr/bin/chromium', pkg: 'chromium' };
export const PROMTOOL: DebianTool = { path: '/usr/bin/promtool', pkg: 'prometheus' };
/** The connection pooler of the integration suite's pooler pass (kit/pgbouncer.ts), in transaction mode. */
export const PGBOUNCER: DebianTool = { path: '/usr/sbin/pgbouncer', pkg: 'pgbouncer' };

// Keeps apt from starting the services a package brings (prometheus would listen on 9090, pgbouncer on 6432).
const POLICY_RC = '/usr/sbin/policy-rc.d';

/** Installs the packages of the tools that are missing; resolves when every tool's path exists. */
export async function ensureDebianTools(tools: DebianTool[]): Promise<string[]> {
  const missing = tools.filter((tool) => !existsSync(tool.path));
  if (missing.length === 0) return [];
  const pkgs = [...new Set(missing.map((tool) => tool.pkg))];
  const hint = `install them with: apt-get install -y --no-install-recommends ${pkgs.join(' ')}`;
  if (process.getuid?.() !== 0) throw new Error(`missing ${missing.map((t) => t.path).join(', ')}; as root, ${hint}`);
  const ownPolicy = !existsSync(POLICY_RC);
  if (ownPolicy) writeFileSync(POLICY_RC, '#!/bin/sh\nexit 101\n', { mode: 0o755 });
  try {
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    await run('apt-get', ['install', '-y', '--no-install-recommends', ...pkgs], { env, timeout: 600_000 }).catch(
      async () => {
        // A machine that never ran apt-get update has no package lists yet.
        await run('apt-get', ['update'], { env, timeout: 300_000 });
        await run('apt-get', ['install', '-y', '--no-install-recommends', ...pkgs], { env, timeout: 600_000 });
      },
    );
  } catch (err) {
    throw new Error(`could not install ${pkgs.join(' ')} (${(err as Error).message.split('\n')[0]}); ${hint}`);
  } finally {
    if (ownPolicy) rmSync(POLICY_RC, { force: true });
  }
  const still = missing.filter((tool) => !existsSync(tool.path));
  if (still.length > 0) throw new Error(`${still.map((t) => t.path).join(', ')} still missing after apt-get; ${hint}`);
  return pkgs;
}
